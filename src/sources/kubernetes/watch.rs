//! The watches: one reflector per resource kept current by the API server's watch stream, and
//! their health. A resource is trusted only after a complete list since its last failure, so
//! "ready" always means the store matches the cluster as of a full sync.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::dra::objects::{Claim, Class, Rule, Slice, Template};
use super::error;
use super::kept::{self, Kept};
use super::objects::{GpuNode, GpuPod, KueueWorkload};
use super::pods;

mod dra;

const KUEUE_GROUP: &str = "kueue.x-k8s.io";
/// How often to look again for Kueue when it was not installed.
const KUEUE_RECHECK: Duration = Duration::from_secs(300);
/// How soon to try again when looking for Kueue failed.
const KUEUE_RETRY: Duration = Duration::from_secs(30);
/// Repeated 410s closer together than this, with no change between, are a server in a loop,
/// not compaction: they back off like errors.
const GONE_WINDOW: Duration = Duration::from_secs(10);
/// Objects asked for a list page: a page of real nodes is a few megabytes, well under what
/// one answer may take (answers.rs).
pub const PAGE: u32 = 200;
/// Slices asked for a list page: a DynamicMIG slice is dense (a GPU's 26 devices, 33 KB of
/// JSON, weigh about 260 KB decoded, answers.rs), and one may hold 128 devices, so 200 of them
/// would pass what one answer may weigh; 32 of the largest weigh about 41 MB.
pub const SLICE_PAGE: u32 = 32;

/// One watched resource's health.
#[derive(Debug, Clone, Default)]
struct Synced {
    /// A full list has completed at least once.
    listed: bool,
    /// The last failure (what was being done, and why), until a full list succeeds again.
    error: Option<(&'static str, String)>,
    /// What the store left out (kept.rs).
    cut: Option<String>,
}

#[derive(Debug, Clone)]
enum Kueue {
    Discovering,
    Absent,
    /// Discovery itself failed; tried again later.
    Unknown(String),
    Present(Synced),
}

/// Dynamic Resource Allocation's kinds, each watched where served.
#[derive(Debug, Clone, Default)]
struct DraSynced {
    slices: Synced,
    claims: Synced,
    templates: Synced,
    classes: Synced,
    /// `None`: the API server does not serve DeviceTaintRules (resource.k8s.io/v1beta2).
    rules: Option<Synced>,
}

#[derive(Debug, Clone)]
enum Dra {
    Discovering,
    /// resource.k8s.io/v1 is not served: a cluster without DRA.
    Absent,
    Unknown(String),
    Present(Box<DraSynced>),
}

#[derive(Debug)]
struct Health {
    nodes: Synced,
    pods: Synced,
    classes: Synced,
    kueue: Kueue,
    dra: Dra,
    /// Ready was reported once: from then on a late optional part (Kueue installed later, a
    /// PriorityClass relist) is a note, not a reason to hold back nodes and pods.
    ready_once: bool,
}

/// What the stores are good for right now.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// The first complete list has not arrived yet.
    Syncing,
    /// Nodes or pods cannot be trusted: the message says why.
    Failed(String),
    /// Complete; `notes` name optional parts (PriorityClasses, Kueue) that failed.
    Ready { notes: Vec<String> },
}

#[derive(Clone)]
struct Shared {
    health: Arc<Mutex<Health>>,
    changed: Arc<Notify>,
    /// Counts every change to a store or to health: what was built from them at one count
    /// holds until the count moves.
    generation: Arc<AtomicU64>,
}

impl Shared {
    /// Something a build reads changed.
    fn touch(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn update(&self, f: impl FnOnce(&mut Health)) {
        if let Ok(mut h) = self.health.lock() {
            f(&mut h);
        }
        self.touch();
        // One waiter at a time: a stored permit means no change is missed between a
        // look at the state and the wait.
        self.changed.notify_one();
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Nodes,
    Pods,
    Classes,
    Kueue,
    Slices,
    Claims,
    Templates,
    DeviceClasses,
    TaintRules,
}

impl Slot {
    /// The objects of the slot, as notes name them.
    fn objects(self) -> &'static str {
        match self {
            Self::Nodes => "nodes",
            Self::Pods => "pods",
            Self::Classes => "PriorityClasses",
            Self::Kueue => "workloads",
            Self::Slices => "ResourceSlices",
            Self::Claims => "ResourceClaims",
            Self::Templates => "ResourceClaimTemplates",
            Self::DeviceClasses => "DeviceClasses",
            Self::TaintRules => "DeviceTaintRules",
        }
    }

    fn sync(self, h: &mut Health) -> Option<&mut Synced> {
        match self {
            Self::Nodes => Some(&mut h.nodes),
            Self::Pods => Some(&mut h.pods),
            Self::Classes => Some(&mut h.classes),
            Self::Kueue => match &mut h.kueue {
                Kueue::Present(s) => Some(s),
                _ => None,
            },
            dra => match &mut h.dra {
                Dra::Present(d) => match dra {
                    Self::Slices => Some(&mut d.slices),
                    Self::Claims => Some(&mut d.claims),
                    Self::Templates => Some(&mut d.templates),
                    Self::DeviceClasses => Some(&mut d.classes),
                    _ => d.rules.as_mut(),
                },
                _ => None,
            },
        }
    }
}

/// The DRA watch stores, once resource.k8s.io is found.
#[derive(Clone)]
pub struct DraStores {
    pub slices: Store<Slice>,
    pub claims: Store<Claim>,
    pub templates: Store<Template>,
    pub classes: Store<Class>,
    /// `None` where DeviceTaintRules are not served.
    pub rules: Option<Store<Rule>>,
}

/// The running watches; dropping this stops them.
pub struct Watches {
    pub nodes: Store<GpuNode>,
    pub pods: Store<GpuPod>,
    pub classes: Store<PriorityClass>,
    kueue: Arc<Mutex<Option<Store<KueueWorkload>>>>,
    dra: Arc<Mutex<Option<DraStores>>>,
    shared: Shared,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Watches {
    /// Start watching nodes, GPU pods, PriorityClasses and, where installed, Kueue Workloads.
    /// `server` names the API server in messages.
    pub fn start(client: Client, server: &str) -> Self {
        let shared = Shared {
            health: Arc::new(Mutex::new(Health {
                nodes: Synced::default(),
                pods: Synced::default(),
                classes: Synced::default(),
                kueue: Kueue::Discovering,
                dra: Dra::Discovering,
                ready_once: false,
            })),
            changed: Arc::new(Notify::new()),
            generation: Arc::new(AtomicU64::new(0)),
        };
        let server = Arc::<str>::from(server);
        let (nodes, w_nodes) = reflector::store();
        let (pods, w_pods) = reflector::store();
        let (classes, w_classes) = reflector::store();
        // Finished pods hold nothing: let the server leave them out (and tell us when a pod
        // finishes, as a delete).
        let cfg = watcher::Config::default().page_size(PAGE);
        let pod_cfg = cfg.clone().fields("status.phase!=Succeeded,status.phase!=Failed");
        let kueue = Arc::new(Mutex::new(None));
        let dra = Arc::new(Mutex::new(None));
        let tasks = vec![
            tokio::spawn(run(
                Api::all(client.clone()),
                cfg.clone(),
                (w_nodes, Kept::new(kept::NODES), ()),
                strip_meta::<GpuNode>,
                Slot::Nodes,
                shared.clone(),
                server.clone(),
            )),
            tokio::spawn(run(
                Api::all(client.clone()),
                pod_cfg,
                (w_pods, Kept::new(kept::PODS), ()),
                pods::strip,
                Slot::Pods,
                shared.clone(),
                server.clone(),
            )),
            tokio::spawn(run(
                Api::all(client.clone()),
                cfg,
                (w_classes, Kept::new(kept::CLASSES), ()),
                strip_meta::<PriorityClass>,
                Slot::Classes,
                shared.clone(),
                server.clone(),
            )),
            tokio::spawn(kueue_task(client.clone(), kueue.clone(), shared.clone(), server.clone())),
            tokio::spawn(dra::task(client, dra.clone(), shared.clone(), server)),
        ];
        Self { nodes, pods, classes, kueue, dra, shared, tasks }
    }

    pub fn kueue(&self) -> Option<Store<KueueWorkload>> {
        self.kueue.lock().ok().and_then(|k| k.clone())
    }

    pub fn dra(&self) -> Option<DraStores> {
        self.dra.lock().ok().and_then(|k| k.clone())
    }

    /// Why the DRA claims, the DeviceTaintRules where served, and the slices are not known now
    /// (a failed watch, or a first list not done): `(claims, rules, slices)`, `None` where known.
    pub fn dra_unknown(&self) -> (Option<String>, Option<String>, Option<String>) {
        let Ok(h) = self.shared.health.lock() else {
            let why = Some("internal: health lock poisoned".to_string());
            return (why.clone(), why.clone(), why);
        };
        let Dra::Present(d) = &h.dra else { return (None, None, None) };
        let why = |what: &str, s: &Synced| match &s.error {
            Some((verb, e)) => Some(format!("{verb} {what}: {e}")),
            None if !s.listed => Some(format!("first list of {what} in progress")),
            None => None,
        };
        let rules = d.rules.as_ref().and_then(|r| why("devicetaintrules", r));
        (why("resourceclaims", &d.claims), rules, why("resourceslices", &d.slices))
    }

    /// Moves whenever a store or the health changes: read it before the stores, and what
    /// was built from them stays true while it reads the same.
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    pub fn state(&self) -> State {
        let Ok(mut h) = self.shared.health.lock() else {
            return State::Failed("internal: health lock poisoned".into());
        };
        match (&h.nodes.error, &h.pods.error) {
            (Some(a), Some(b)) if a == b => return State::Failed(format!("{} nodes and pods: {}", a.0, a.1)),
            (Some(a), Some(b)) => return State::Failed(format!("{} nodes: {}; {} pods: {}", a.0, a.1, b.0, b.1)),
            (Some((verb, why)), None) => return State::Failed(format!("{verb} nodes: {why}")),
            (None, Some((verb, why))) => return State::Failed(format!("{verb} pods: {why}")),
            (None, None) => {}
        }
        let mut notes = Vec::new();
        let cuts = [("nodes", &h.nodes.cut), ("pods", &h.pods.cut), ("PriorityClasses", &h.classes.cut)];
        notes.extend(cuts.into_iter().filter_map(|(what, cut)| cut.as_ref().map(|c| format!("{what}: {c}"))));
        if let Kueue::Present(Synced { cut: Some(c), .. }) = &h.kueue {
            notes.push(format!("Kueue workloads: {c}"));
        }
        let mut optional_syncing = false;
        optional_syncing |= dra_notes(&h.dra, h.ready_once, &mut notes);
        match (&h.classes.error, h.classes.listed) {
            (Some((verb, why)), _) => {
                notes.push(format!("PriorityClass values unknown: {verb} priorityclasses: {why}"))
            }
            (None, listed) => optional_syncing |= !listed,
        }
        match &h.kueue {
            Kueue::Discovering => optional_syncing = true,
            Kueue::Absent => {}
            Kueue::Unknown(e) => notes.push(format!("Kueue not checked: {e}")),
            Kueue::Present(s) => match &s.error {
                Some((verb, why)) => notes.push(format!("Kueue: {verb} workloads: {why}")),
                None if !s.listed && h.ready_once => notes.push("Kueue: first list in progress".into()),
                None => optional_syncing |= !s.listed,
            },
        }
        if !h.nodes.listed || !h.pods.listed || optional_syncing && !h.ready_once {
            return State::Syncing;
        }
        h.ready_once = true;
        State::Ready { notes }
    }

    /// Wait until any watch's health changes.
    pub async fn changed(&self) {
        self.shared.changed.notified().await;
    }
}

/// DRA's notes (failures, what is left out, DeviceTaintRules not served); whether a part
/// is still on its first list.
fn dra_notes(dra: &Dra, ready_once: bool, notes: &mut Vec<String>) -> bool {
    let d = match dra {
        Dra::Discovering => return true,
        Dra::Absent => return false,
        Dra::Unknown(e) => {
            notes.push(format!("DRA (resource.k8s.io) not checked: {e}"));
            return false;
        }
        Dra::Present(d) => d,
    };
    let mut syncing = false;
    let parts = [
        ("resourceslices", Some(&d.slices)),
        ("resourceclaims", Some(&d.claims)),
        ("resourceclaimtemplates", Some(&d.templates)),
        ("deviceclasses", Some(&d.classes)),
        ("devicetaintrules", d.rules.as_ref()),
    ];
    for (what, s) in parts {
        let Some(s) = s else {
            notes.push(
                "DRA: DeviceTaintRules not served (resource.k8s.io/v1beta2 with the DRADeviceTaintRules feature gate): \
                 taints set by rules are not seen"
                    .into(),
            );
            continue;
        };
        if let Some(c) = &s.cut {
            notes.push(format!("DRA: {c}"));
        }
        match &s.error {
            Some((verb, why)) => notes.push(format!("DRA: {verb} {what}: {why}")),
            None if !s.listed && ready_once => notes.push(format!("DRA: first list of {what} in progress")),
            None => syncing |= !s.listed,
        }
    }
    syncing
}

/// Drop the bookkeeping a store need not keep (managed fields are often most of an object).
fn strip_meta<K: kube::Resource>(k: &mut K) {
    let m = k.meta_mut();
    m.managed_fields = None;
    m.annotations = None;
}

/// Keep one reflector store current. On any error but a lone 410 the watch starts over with a
/// fresh list after a backoff: the store keeps its last contents meanwhile (stale, not empty),
/// and health recovers only when that list completes.
async fn run<K>(
    api: Api<K>,
    cfg: watcher::Config,
    (mut writer, mut kept, dyntype): (reflector::store::Writer<K>, Kept, K::DynamicType),
    strip: fn(&mut K),
    slot: Slot,
    shared: Shared,
    server: Arc<str>,
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let mut failures = 0u32;
    let reader = writer.as_reader();
    loop {
        let mut stream = std::pin::pin!(watcher::watcher(api.clone(), cfg.clone()));
        let mut gone: Option<(Instant, u32)> = None;
        while let Some(item) = stream.next().await {
            shared.touch();
            match item {
                Ok(event) => {
                    let event = event.modify(strip);
                    let known = |k: &K| reader.get(&k.to_object_ref(dyntype.clone())).is_some();
                    let admitted = kept.admit(&event, reader.len(), known);
                    if admitted {
                        writer.apply_watcher_event(&event);
                        // Again once the store holds it: a build that read the generation
                        // between the first touch and this one must not stand for the event.
                        shared.touch();
                    }
                    if !admitted || matches!(event, Event::InitDone) {
                        let cut = kept.note(slot.objects());
                        shared.update(|h| {
                            if let Some(s) = slot.sync(h) {
                                s.cut = cut;
                            }
                        });
                    }
                    match event {
                        Event::InitDone => {
                            failures = 0;
                            shared.update(|h| {
                                if let Some(s) = slot.sync(h) {
                                    s.listed = true;
                                    s.error = None;
                                }
                            });
                        }
                        Event::Apply(_) | Event::Delete(_) => gone = None,
                        Event::Init | Event::InitApply(_) => {}
                    }
                }
                Err(e) => {
                    // 410 Gone: the watch fell behind compaction and the watcher lists again
                    // by itself; only a burst of them is treated as a failure.
                    if error::is_gone(&e) {
                        let n = match gone {
                            Some((at, n)) if at.elapsed() <= GONE_WINDOW => n + 1,
                            _ => 1,
                        };
                        gone = Some((Instant::now(), n));
                        if n <= 3 {
                            continue;
                        }
                    }
                    let failure = error::describe_watch(&e, &server);
                    shared.update(|h| {
                        if let Some(s) = slot.sync(h) {
                            s.error = Some(failure);
                        }
                    });
                    break;
                }
            }
        }
        failures = failures.saturating_add(1);
        tokio::time::sleep(crate::sources::backoff(Duration::from_millis(500), failures - 1, Duration::from_secs(30)))
            .await;
    }
}

/// Find Kueue's Workload API (v1beta2 preferred, v1beta1 accepted) and watch it; without
/// Kueue, look again now and then.
async fn kueue_task(client: Client, slot: Arc<Mutex<Option<Store<KueueWorkload>>>>, shared: Shared, server: Arc<str>) {
    loop {
        match discover(&client).await {
            Ok(Some(ar)) => {
                let writer = reflector::store::Writer::new(ar.clone());
                if let Ok(mut s) = slot.lock() {
                    *s = Some(writer.as_reader());
                }
                shared.update(|h| h.kueue = Kueue::Present(Synced::default()));
                let api = Api::<KueueWorkload>::all_with(client, &ar);
                let cfg = watcher::Config::default().page_size(PAGE);
                let store = (writer, Kept::new(kept::WORKLOADS), ar);
                run(api, cfg, store, strip_meta::<KueueWorkload>, Slot::Kueue, shared, server).await;
                return;
            }
            Ok(None) => {
                shared.update(|h| h.kueue = Kueue::Absent);
                tokio::time::sleep(KUEUE_RECHECK).await;
            }
            Err(e) => {
                let message = error::describe(&e, &server);
                shared.update(|h| h.kueue = Kueue::Unknown(message));
                tokio::time::sleep(KUEUE_RETRY).await;
            }
        }
    }
}

/// The Workload resource of the best served Kueue version; `None` when Kueue is not installed.
async fn discover(client: &Client) -> Result<Option<ApiResource>, kube::Error> {
    let group = match kube::discovery::group(client, KUEUE_GROUP).await {
        Ok(g) => g,
        Err(kube::Error::Discovery(_)) => return Ok(None),
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut served: BTreeMap<u8, ApiResource> = BTreeMap::new();
    for version in group.versions() {
        let rank = match version {
            "v1beta2" => 0,
            "v1beta1" => 1,
            _ => continue,
        };
        if let Some((ar, _)) = group.versioned_resources(version).into_iter().find(|(ar, _)| ar.plural == "workloads") {
            served.insert(rank, ar);
        }
    }
    Ok(served.into_values().next())
}
