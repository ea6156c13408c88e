//! Running Kubernetes's operations (its plans are `act::kubernetes`'s): merge-patches of nodes
//! (cordon, labels) read back and compared,
//! evictions through the Eviction API (PodDisruptionBudgets may refuse them), and following a
//! node label (the GPU Operator's `nvidia.com/mig.config.state`) to success or failure, and
//! DeviceTaintRules created and deleted (a delete only of a rule with tessera's label).

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::time::Instant;

use super::{Env, Op, Ran, Runs};
use crate::act::kubernetes::{Kubernetes, TAINT_RULES_PATH};
use crate::model::dra::MANAGED_BY;
use crate::sources::kubernetes::{ClientError, Settings, client};

/// Why a Kubernetes step failed: the call and the API server's answer, or what the node
/// showed afterwards.
#[derive(Debug, thiserror::Error)]
pub enum KubeStepError {
    #[error("Kubernetes is not configured here")]
    NotConfigured,
    /// Not one of the Kubernetes operations.
    #[error("the Kubernetes executor cannot run {0:?}")]
    CannotRun(Box<Op>),
    #[error(transparent)]
    Client(#[from] ClientError),
    /// No answer in time; `then` says what that leaves (the change may have been made).
    #[error("{call}: no answer within {after:?}{then}")]
    NoAnswer { call: String, after: Duration, then: &'static str },
    /// The node patched does not exist.
    #[error("{call}: no node {node} (HTTP 404)")]
    NoNode { call: String, node: String },
    /// A call failed: the API server's answer, or why it could not be reached.
    #[error("{}", describe(call, source))]
    Call { call: String, source: kube::Error },
    /// The node read back is not JSON this side can read.
    #[error("{call}: cannot read the node back: {source}")]
    ReadBack { call: String, source: serde_json::Error },
    /// The patched field reads back as another value.
    #[error("node {node}: {field} is {now} after the patch, not {want}: something changed it back")]
    Reverted { node: String, field: String, now: String, want: String },
    #[error("pod {namespace}/{pod} no longer exists")]
    PodGone { namespace: String, pod: String },
    /// The Eviction API answered 429: a PodDisruptionBudget (`budget`) or throttling;
    /// `message` is the server's.
    #[error(
        "eviction of {namespace}/{pod} refused: {} (HTTP 429): {message}",
        if *budget { "a PodDisruptionBudget allows no disruption now" } else { "the API server is throttling" }
    )]
    EvictionRefused { namespace: String, pod: String, budget: bool, message: String },
    #[error("watching node {node}: the watch ended")]
    WatchEnded { node: String },
    /// The watch's first list did not have the node.
    #[error("watching node {node}: no node {node}")]
    NotListed { node: String },
    /// The watch failed in a way waiting will not mend (401, 403, 404...).
    #[error("watching node {node}: {}", watch_error(source))]
    Watch { node: String, source: watcher::Error },
    #[error("node {node} was deleted while waiting for {key}")]
    Deleted { node: String, key: String },
    /// The label kept the value it had before the change for `secs`: nothing picked it up.
    #[error("{key} stayed {was}, its value from before the change, for {secs} s: {}", not_picked_up(key, node))]
    Unchanged { key: String, was: String, secs: u64, node: String },
    /// The label did not reach `success` in time; `last` is what was seen, in words.
    #[error("{key} did not become {success} within {secs} s; last value seen: {last}")]
    TimedOut { key: String, success: String, secs: u64, last: String },
    /// The collection is not served (HTTP 404 on a create).
    #[error(
        "{call}: the API server does not serve DeviceTaintRules (HTTP 404): they need Kubernetes 1.36 or later with \
         the DRADeviceTaintRules feature gate on and --runtime-config=resource.k8s.io/v1beta2=true"
    )]
    TaintRulesNotServed { call: String },
    /// The rule is not tessera's: an undrain leaves it alone.
    #[error("DeviceTaintRule {name} does not carry label {}={}: tessera did not make it, so it is left alone", MANAGED_BY.0, MANAGED_BY.1)]
    NotOurs { name: String },
    /// A rule object the plan wrote does not read as a DeviceTaintRule (a bug, said).
    #[error("DeviceTaintRule {name}: {source}")]
    BadRule { name: String, source: serde_json::Error },
    /// The label took its failure value.
    #[error("{key} = {value}: {}", who_failed(key))]
    LabelFailed { key: String, value: String },
}

/// Why a label kept its value: for the GPU Operator's, the MIG manager.
fn not_picked_up(key: &str, node: &str) -> String {
    if key.starts_with("nvidia.com/mig.") {
        format!(
            "the MIG manager did not pick the change up (is it running on {node}? was that config already applied?)"
        )
    } else {
        "nothing picked the change up".into()
    }
}

/// Who reported a label's failure value, and where to look.
fn who_failed(key: &str) -> &'static str {
    if key.starts_with("nvidia.com/mig.") {
        "the MIG manager could not apply the config; see its logs"
    } else {
        "the controller reported a failure; see its logs"
    }
}

/// Longest one API call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a label may keep the final value it had before the change before we conclude that
/// nothing picked the change up.
const UNCHANGED_PATIENCE: Duration = Duration::from_secs(60);

impl Runs for Kubernetes {
    fn run<'a>(&'a self, op: &'a Op, env: &'a Env) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            let settings = env.kubernetes.as_ref().ok_or(KubeStepError::NotConfigured)?;
            Ok((run_op(op, settings).await?, None))
        })
    }
}

pub async fn run_op(op: &Op, settings: &Settings) -> Result<String, KubeStepError> {
    match op {
        Op::KubePatchNode { node, patch } => patch_node(settings, node, patch).await,
        Op::KubeEvict { namespace, pod } => evict(settings, namespace, pod).await,
        Op::KubeCreateTaintRule { name, object } => create_rule(settings, name, object).await,
        Op::KubeDeleteTaintRule { name } => delete_rule(settings, name).await,
        Op::KubeWaitLabel { node, key, success, failure, timeout_s } => {
            let want = Want { key, success, failure };
            wait_label(settings, node, &want, Duration::from_secs(*timeout_s)).await
        }
        other => Err(KubeStepError::CannotRun(Box::new(other.clone()))),
    }
}

async fn patch_node(settings: &Settings, node: &str, patch: &Value) -> Result<String, KubeStepError> {
    let api: Api<Node> = Api::all(client(settings).await?);
    let call = format!("PATCH /api/v1/nodes/{node}");
    // A merge patch is idempotent, but a timed-out one may still have been applied: say so.
    match tokio::time::timeout(CALL_TIMEOUT, api.patch(node, &PatchParams::default(), &Patch::Merge(patch))).await {
        Err(_) => {
            let then = "; the change may or may not be made";
            return Err(KubeStepError::NoAnswer { call, after: CALL_TIMEOUT, then });
        }
        Ok(Err(e)) if code(&e) == Some(404) => return Err(KubeStepError::NoNode { call, node: node.to_string() }),
        Ok(Err(source)) => return Err(KubeStepError::Call { call, source }),
        Ok(Ok(_)) => {}
    }
    // Read back rather than trust the PATCH answer: an admission webhook or a controller may
    // undo the change, and the operator is told what the node says now.
    let call = format!("GET /api/v1/nodes/{node}");
    let got = match tokio::time::timeout(CALL_TIMEOUT, api.get(node)).await {
        Err(_) => {
            let call = format!("{call} (read back after the patch)");
            return Err(KubeStepError::NoAnswer { call, after: CALL_TIMEOUT, then: "" });
        }
        Ok(Err(source)) => {
            return Err(KubeStepError::Call { call: format!("{call} (read back after the patch)"), source });
        }
        Ok(Ok(n)) => serde_json::to_value(&n).map_err(|source| KubeStepError::ReadBack { call, source })?,
    };
    let mut wanted = Vec::new();
    leaves(patch, &mut Vec::new(), &mut wanted);
    let mut shown = Vec::new();
    for (path, want) in &wanted {
        let now = path.iter().try_fold(&got, |v, k| v.get(k)).unwrap_or(&Value::Null);
        let name = field_name(path);
        // The API server omits false booleans (omitempty): absent reads as false.
        let same = now == want || (now.is_null() && (want.is_null() || *want == Value::Bool(false)));
        if !same {
            let now = if now.is_null() && want.is_boolean() { "false".into() } else { plain(now) };
            return Err(KubeStepError::Reverted { node: node.to_string(), field: name, now, want: plain(want) });
        }
        shown.push(format!("{name} = {}", plain(want)));
    }
    Ok(format!("node {node}: {}", shown.join(", ")))
}

/// Every leaf of a merge patch as (path, value); `null` means "removed".
fn leaves(v: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                path.push(k.clone());
                leaves(x, path, out);
                path.pop();
            }
        }
        other => out.push((path.clone(), other.clone())),
    }
}

fn field_name(path: &[String]) -> String {
    match path {
        [m, l, key] if m == "metadata" && l == "labels" => format!("label {key}"),
        _ => path.join("."),
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "(not set)".into(),
        other => other.to_string(),
    }
}

async fn evict(settings: &Settings, namespace: &str, pod: &str) -> Result<String, KubeStepError> {
    let api: Api<Pod> = Api::namespaced(client(settings).await?, namespace);
    let call = format!("POST /api/v1/namespaces/{namespace}/pods/{pod}/eviction");
    // Not `Api::evict`: kube 5 sends a body without apiVersion, kind or namespace (and with a
    // snake_case `delete_options`); this is the policy/v1 Eviction the API documents.
    let body = Eviction {
        metadata: ObjectMeta { name: Some(pod.into()), namespace: Some(namespace.into()), ..ObjectMeta::default() },
        delete_options: None,
    };
    let params = PostParams::default();
    let post = api.create_subresource::<_, Value>("eviction", pod, &params, &body);
    match tokio::time::timeout(CALL_TIMEOUT, post).await {
        Err(_) => {
            let then = "; the pod may or may not be terminating";
            Err(KubeStepError::NoAnswer { call, after: CALL_TIMEOUT, then })
        }
        Ok(Ok(_)) => Ok(format!("eviction of {namespace}/{pod} accepted (graceful termination started)")),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            Err(KubeStepError::PodGone { namespace: namespace.to_string(), pod: pod.to_string() })
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 429 => {
            let causes: Vec<&str> = s.details.iter().flat_map(|d| &d.causes).map(|c| c.message.as_str()).collect();
            let budget = s.details.iter().flat_map(|d| &d.causes).any(|c| c.reason == "DisruptionBudget")
                || s.message.to_ascii_lowercase().contains("disruption budget");
            let mut message = s.message.trim().to_string();
            if !causes.is_empty() {
                message = format!("{message} ({})", causes.join("; "));
            }
            // The same code also means plain API throttling: do not blame a PDB for that.
            Err(KubeStepError::EvictionRefused {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                budget,
                message,
            })
        }
        Ok(Err(source)) => Err(KubeStepError::Call { call, source }),
    }
}

async fn create_rule(settings: &Settings, name: &str, object: &Value) -> Result<String, KubeStepError> {
    let rule: DeviceTaintRule = serde_json::from_value(object.clone())
        .map_err(|source| KubeStepError::BadRule { name: name.to_string(), source })?;
    let api: Api<DeviceTaintRule> = Api::all(client(settings).await?);
    let call = format!("POST {TAINT_RULES_PATH} ({name})");
    match tokio::time::timeout(CALL_TIMEOUT, api.create(&PostParams::default(), &rule)).await {
        Err(_) => {
            let then = "; the rule may or may not be created";
            Err(KubeStepError::NoAnswer { call, after: CALL_TIMEOUT, then })
        }
        Ok(Err(e)) if code(&e) == Some(404) => Err(KubeStepError::TaintRulesNotServed { call }),
        Ok(Err(source)) => Err(KubeStepError::Call { call, source }),
        Ok(Ok(r)) => {
            let sel = r.spec.device_selector.as_ref();
            let device = sel.and_then(|s| s.device.as_deref()).unwrap_or("?");
            Ok(format!("DeviceTaintRule {name} created ({} on {device})", r.spec.taint.effect))
        }
    }
}

/// Delete a rule tessera made: read it first, and leave a rule without tessera's label alone.
async fn delete_rule(settings: &Settings, name: &str) -> Result<String, KubeStepError> {
    let api: Api<DeviceTaintRule> = Api::all(client(settings).await?);
    let call = format!("GET {TAINT_RULES_PATH}/{name}");
    let rule = match tokio::time::timeout(CALL_TIMEOUT, api.get(name)).await {
        Err(_) => return Err(KubeStepError::NoAnswer { call, after: CALL_TIMEOUT, then: "" }),
        Ok(Err(e)) if code(&e) == Some(404) => return Ok(format!("DeviceTaintRule {name} was already gone")),
        Ok(Err(source)) => return Err(KubeStepError::Call { call, source }),
        Ok(Ok(r)) => r,
    };
    let (key, value) = MANAGED_BY;
    if rule.metadata.labels.as_ref().and_then(|l| l.get(key)).is_none_or(|v| v != value) {
        return Err(KubeStepError::NotOurs { name: name.to_string() });
    }
    let call = format!("DELETE {TAINT_RULES_PATH}/{name}");
    match tokio::time::timeout(CALL_TIMEOUT, api.delete(name, &DeleteParams::default())).await {
        Err(_) => {
            let then = "; the rule may or may not be deleted";
            Err(KubeStepError::NoAnswer { call, after: CALL_TIMEOUT, then })
        }
        Ok(Err(e)) if code(&e) == Some(404) => Ok(format!("DeviceTaintRule {name} was already gone")),
        Ok(Err(source)) => Err(KubeStepError::Call { call, source }),
        Ok(Ok(_)) => Ok(format!("DeviceTaintRule {name} deleted")),
    }
}

/// What a followed label must become.
struct Want<'a> {
    key: &'a str,
    success: &'a str,
    failure: &'a str,
}

/// What was seen of the label so far.
#[derive(Default)]
struct Seen {
    /// The first value read (`Some(None)`: read, and the label was not set).
    first: Option<Option<String>>,
    /// The label has had a value other than the first.
    changed: bool,
    last: Option<String>,
}

impl Seen {
    fn observe(&mut self, value: Option<String>) {
        match &self.first {
            None => self.first = Some(value.clone()),
            Some(f) => self.changed |= *f != value,
        }
        self.last = value;
    }

    /// The label kept the value it had before the change for `UNCHANGED_PATIENCE` (within
    /// `timeout`).
    fn unchanged(&self, key: &str, node: &str, timeout: Duration) -> KubeStepError {
        let was = self.last.clone().unwrap_or_default();
        let secs = UNCHANGED_PATIENCE.min(timeout).as_secs();
        KubeStepError::Unchanged { key: key.to_string(), was, secs, node: node.to_string() }
    }

    /// `timeout` passed before the label became `want.success`: what was last seen, or why
    /// nothing was (`error`, the last watch error).
    fn timed_out(&self, want: &Want<'_>, error: Option<&str>, timeout: Duration) -> KubeStepError {
        let last = match (&self.first, &self.last, error) {
            (Some(_), Some(v), _) => v.clone(),
            (Some(_), None, _) => "none (the label is not set)".into(),
            (None, _, Some(e)) => format!("none (no answer: {e})"),
            (None, _, None) => "none (no answer)".into(),
        };
        KubeStepError::TimedOut {
            key: want.key.to_string(),
            success: want.success.to_string(),
            secs: timeout.as_secs(),
            last,
        }
    }
}

/// A watch rather than polling: the GPU Operator's state goes pending -> success, and a poll
/// that misses `pending` cannot tell a fresh `success` from the one left by the last change.
async fn wait_label(
    settings: &Settings,
    node: &str,
    want: &Want<'_>,
    timeout: Duration,
) -> Result<String, KubeStepError> {
    let key = want.key;
    let api: Api<Node> = Api::all(client(settings).await?);
    let started = Instant::now();
    let deadline = started + timeout;
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut stream = std::pin::pin!(watcher::watcher(api, cfg).default_backoff());
    let (mut seen, mut listed, mut error) = (Seen::default(), false, None::<String>);
    loop {
        let unchanged_until = started + UNCHANGED_PATIENCE.min(timeout);
        let terminal = |v: &Option<String>| matches!(v.as_deref(), Some(x) if x == want.success || x == want.failure);
        let stuck = seen.first.as_ref().is_some_and(terminal) && !seen.changed;
        let until = if stuck { unchanged_until } else { deadline };
        let event = match tokio::time::timeout_at(until, stream.next()).await {
            Ok(Some(e)) => e,
            Ok(None) => return Err(KubeStepError::WatchEnded { node: node.to_string() }),
            Err(_) if stuck => return Err(seen.unchanged(key, node, timeout)),
            Err(_) => return Err(seen.timed_out(want, error.as_deref(), timeout)),
        };
        let Some(n) = applied(event, node, key, &mut listed, &mut error)? else { continue };
        listed = true;
        error = None;
        let value = n.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned();
        seen.observe(value.clone());
        // A final value only counts once the label has moved: the one present before the
        // change is the previous change's result.
        if !seen.changed {
            continue;
        }
        let secs = started.elapsed().as_secs();
        match value.as_deref() {
            Some(v) if v == want.success => return Ok(format!("{key} = {v} after {secs} s")),
            Some(v) if v == want.failure => {
                return Err(KubeStepError::LabelFailed { key: key.to_string(), value: v.to_string() });
            }
            _ => {}
        }
    }
}

/// The node a watch event brings, if it brings one (`None`: wait for the next event). A
/// relist clears `listed`; a list that ended without the node, the node's deletion and a
/// watch error that waiting will not mend are errors; another watch error is kept in `error`.
fn applied(
    event: Result<Event<Node>, watcher::Error>,
    node: &str,
    key: &str,
    listed: &mut bool,
    error: &mut Option<String>,
) -> Result<Option<Node>, KubeStepError> {
    match event {
        Ok(Event::Init) => {
            *listed = false;
            Ok(None)
        }
        Ok(Event::InitDone) if !*listed => Err(KubeStepError::NotListed { node: node.to_string() }),
        Ok(Event::InitDone) => Ok(None),
        Ok(Event::Delete(_)) => Err(KubeStepError::Deleted { node: node.to_string(), key: key.to_string() }),
        Ok(Event::InitApply(n) | Event::Apply(n)) => Ok(Some(n)),
        // 401, 403, 404...: waiting will not help. Others (unreachable, 5xx, 429) may pass.
        Err(e) => match error_code(&e) {
            Some(c) if (400..500).contains(&c) && c != 410 && c != 429 => {
                Err(KubeStepError::Watch { node: node.to_string(), source: e })
            }
            _ => {
                *error = Some(watch_error(&e));
                Ok(None)
            }
        },
    }
}

fn error_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::WatchError(s) => Some(s.code),
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            code(e)
        }
        watcher::Error::NoResourceVersion => None,
    }
}

fn watch_error(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(e) => describe("listing", e),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => describe("watching", e),
        watcher::Error::WatchError(s) => {
            format!("the watch sent an error: HTTP {} {}: {}", s.code, s.reason, s.message)
        }
        watcher::Error::NoResourceVersion => "the API server sent no resourceVersion".into(),
    }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// A failed call, named, with the server's answer or the cause at the bottom of the chain
/// (hyper and tower wrap "Connection refused" several layers down). No credential is in
/// either: kube keeps tokens in headers, never in errors.
fn describe(call: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let message = s.message.lines().next().unwrap_or_default().trim();
            let reason = if s.reason.is_empty() { String::new() } else { format!(" {}", s.reason) };
            let message = if message.is_empty() { String::new() } else { format!(": {message}") };
            format!("{call}: the API server answered HTTP {}{reason}{message}", s.code)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("{call}: cannot reach the API server: {}", crate::sources::kubernetes::error::root_cause(e))
        }
        kube::Error::Auth(_) => format!("{call}: authenticating: {}", crate::sources::kubernetes::error::root_cause(e)),
        other => format!("{call}: {other}"),
    }
}
