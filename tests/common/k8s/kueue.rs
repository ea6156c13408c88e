//! Kueue in the fake API server: discovery of its groups (the Workload CRD when installed, the
//! visibility API when served) and the visibility API's pending workloads of a LocalQueue, with
//! `limit` and `offset`, each item shaped like the first of the sample in Kueue's docs
//! (tests/fixtures/kubernetes/kueue/pendingworkloadssummary.clusterqueue.json).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{FakeK8s, State, status_body};

pub const VISIBILITY_GROUP: &str = "visibility.kueue.x-k8s.io";

#[derive(Default)]
pub(super) struct Visibility {
    /// The version served; `None`: the group is not served at all.
    version: Option<&'static str>,
    /// (namespace, LocalQueue) → its pending workloads in queue order.
    queues: BTreeMap<(String, String), Vec<Value>>,
}

/// Where a LocalQueue's pending workloads are asked (no query).
pub fn pending_path(version: &str, namespace: &str, queue: &str) -> String {
    format!("/apis/{VISIBILITY_GROUP}/{version}/namespaces/{namespace}/localqueues/{queue}/pendingworkloads")
}

/// One pending workload as the visibility API describes it.
pub fn pending_item(namespace: &str, name: &str, queue: &str, in_cluster_queue: u64, in_local_queue: u64) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kubernetes/kueue/pendingworkloadssummary.clusterqueue.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let sample: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let mut item = sample["items"][0].clone();
    item["metadata"]["name"] = json!(name);
    item["metadata"]["namespace"] = json!(namespace);
    item["localQueueName"] = json!(queue);
    item["positionInClusterQueue"] = json!(in_cluster_queue);
    item["positionInLocalQueue"] = json!(in_local_queue);
    item
}

impl FakeK8s {
    /// Serve the visibility API as `version` (in discovery and at its paths), or not at all.
    pub fn set_visibility(&self, version: Option<&'static str>) {
        self.with(|s| s.visibility.version = version);
    }

    /// A LocalQueue's pending workloads, in queue order, as (name, position in the cluster
    /// queue); the position in the local queue is the place in this list.
    pub fn pending_workloads(&self, namespace: &str, queue: &str, names: &[(&str, u64)]) {
        let items = names.iter().enumerate();
        let items = items.map(|(i, (name, cq))| pending_item(namespace, name, queue, *cq, i as u64)).collect();
        self.with(|s| s.visibility.queues.insert((namespace.into(), queue.into()), items));
    }

    /// Set a LocalQueue's items as given.
    pub fn pending_items(&self, namespace: &str, queue: &str, items: Vec<Value>) {
        self.with(|s| s.visibility.queues.insert((namespace.into(), queue.into()), items));
    }
}

pub(super) fn groups(s: &State) -> Value {
    let group = |name: &str, version: &str| {
        let gv = json!({"groupVersion": format!("{name}/{version}"), "version": version});
        json!({"name": name, "versions": [gv.clone()], "preferredVersion": gv})
    };
    let mut list = vec![group("scheduling.k8s.io", "v1")];
    if s.kueue {
        list.push(group("kueue.x-k8s.io", "v1beta1"));
    }
    if let Some(v) = s.visibility.version {
        list.push(group(VISIBILITY_GROUP, v));
    }
    list.extend(super::dra::group(s));
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list})
}

pub(super) fn kueue_resources() -> Value {
    let verbs = json!(["get", "list", "watch"]);
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "kueue.x-k8s.io/v1beta1", "resources": [
        {"name": "workloads", "singularName": "workload", "namespaced": true, "kind": "Workload", "verbs": verbs},
        {"name": "workloads/status", "singularName": "", "namespaced": true, "kind": "Workload", "verbs": verbs},
    ]})
}

/// A GET under the visibility group: a LocalQueue's page of pending workloads, Kueue's 404 for
/// a LocalQueue it does not know, the API server's 404 for anything else.
pub(super) fn visibility(s: &State, path: &str, params: &BTreeMap<String, String>) -> (u16, String) {
    let missing = (404, status_body(404, "NotFound", "the server could not find the requested resource"));
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (version, ns, queue) = match parts.as_slice() {
        ["apis", VISIBILITY_GROUP, v, "namespaces", ns, "localqueues", q, "pendingworkloads"] => (*v, *ns, *q),
        _ => return missing,
    };
    if s.visibility.version != Some(version) {
        return missing;
    }
    let Some(items) = s.visibility.queues.get(&(ns.to_string(), queue.to_string())) else {
        let message = format!("localqueue.{VISIBILITY_GROUP} \"{queue}\" not found");
        return (404, status_body(404, "NotFound", &message));
    };
    let number = |k: &str, default: usize| params.get(k).and_then(|v| v.parse().ok()).unwrap_or(default);
    let page: Vec<&Value> = items.iter().skip(number("offset", 0)).take(number("limit", 1000)).collect();
    let summary = json!({"kind": "PendingWorkloadsSummary", "apiVersion": format!("{VISIBILITY_GROUP}/{version}"),
        "metadata": {"creationTimestamp": null}, "items": page});
    (200, summary.to_string())
}
