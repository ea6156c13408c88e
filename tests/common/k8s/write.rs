//! The fake API server's writes: GET and merge-PATCH of one object, pod evictions.

use serde_json::{Value, json};

use super::*;

/// `/api/v1/nodes/NAME` or `/api/v1/namespaces/NS/pods/NAME[/SUB]` as (collection, key, sub).
pub(super) fn one(path: &str) -> Option<(&'static str, String, &str)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api", "v1", "nodes", name] => Some((NODES, format!("/{name}"), "")),
        ["api", "v1", "namespaces", ns, "pods", name, rest @ ..] if rest.len() <= 1 => {
            Some((PODS, format!("{ns}/{name}"), rest.first().copied().unwrap_or_default()))
        }
        _ => None,
    }
}

/// RFC 7386: objects merge key by key, `null` removes, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (k, v) in p {
        if v.is_null() {
            target.as_object_mut().map(|t| t.remove(k));
        } else {
            merge(&mut target[k], v);
        }
    }
}

/// GET or merge-PATCH of one node or pod, and POST of a pod's eviction, as the API server
/// answers them (404 Status for a missing object, 415 for another patch type).
pub(super) fn write(shared: &Shared, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, String) {
    let (lock, cv) = &**shared;
    let mut s = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((collection, key, sub)) = one(path) else {
        return (405, status_body(405, "MethodNotAllowed", "the fake server does not do that"));
    };
    let kind = if collection == NODES { "nodes" } else { "pods" };
    let name = key.rsplit('/').next().unwrap_or_default().to_string();
    let Some(mut obj) = s.collections.get(collection).and_then(|c| c.objects.get(&key)).cloned() else {
        return (404, status_body(404, "NotFound", &format!("{kind} \"{name}\" not found")));
    };
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let out = match (method, sub) {
        ("GET", "") => (200, obj.to_string()),
        ("PATCH", "") if content_type != "application/merge-patch+json" => {
            (415, status_body(415, "UnsupportedMediaType", &format!("the fake server merges only, not {content_type}")))
        }
        ("PATCH", "") if collection == NODES => {
            merge(&mut obj, &body);
            (200, s.upsert(collection, obj).to_string())
        }
        ("POST", "eviction") if body["metadata"]["name"] != json!(name) => {
            (400, status_body(400, "BadRequest", "name in URL does not match name in Eviction object"))
        }
        ("POST", "eviction") => {
            obj["metadata"]["deletionTimestamp"] = json!("2026-03-01T12:00:00Z");
            s.upsert(collection, obj);
            let ok = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
            (201, ok.to_string())
        }
        _ => (405, status_body(405, "MethodNotAllowed", "the fake server does not do that")),
    };
    cv.notify_all();
    out
}
