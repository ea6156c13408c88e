//! The fake API server's writes: GET and merge-PATCH of one object, pod evictions, and
//! DeviceTaintRules: POST to the collection, GET and DELETE of one (where served; a switch
//! refuses creations after a number of them, for the rollback).

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
        ["apis", "resource.k8s.io", "v1beta2", "devicetaintrules", name] => {
            Some((super::dra::TAINT_RULES, format!("/{name}"), ""))
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
    let rules = super::dra::TAINT_RULES;
    let rules_served = s.dra == Some(true);
    if (path == rules || one(path).is_some_and(|o| o.0 == rules)) && !rules_served {
        return (404, status_body(404, "NotFound", "the server could not find the requested resource"));
    }
    if method == "POST" && path == rules {
        let out = create_rule(&mut s, body);
        cv.notify_all();
        return out;
    }
    let Some((collection, key, sub)) = one(path) else {
        return (405, status_body(405, "MethodNotAllowed", "the fake server does not do that"));
    };
    let kind = match collection {
        NODES => "nodes",
        PODS => "pods",
        _ => "devicetaintrules.resource.k8s.io",
    };
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
        ("DELETE", "") if collection == rules => {
            s.rv += 1;
            let rv = s.rv;
            let c = s.collections.entry(rules).or_default();
            c.objects.remove(&key);
            obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            c.events.push((rv, "DELETED", obj.clone()));
            (200, obj.to_string())
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

/// POST of a DeviceTaintRule: 201 with the object as stored, 409 when its name is taken, 403
/// once the creations the switch allows are spent.
fn create_rule(s: &mut State, body: &[u8]) -> (u16, String) {
    let rules = super::dra::TAINT_RULES;
    let Ok(mut obj) = serde_json::from_slice::<Value>(body) else {
        return (400, status_body(400, "BadRequest", "the body is not JSON"));
    };
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    if name.is_empty() || obj["kind"] != json!("DeviceTaintRule") {
        return (400, status_body(400, "BadRequest", "a DeviceTaintRule with a name is needed"));
    }
    if let Some(left) = s.rule_creates_left.as_mut() {
        if *left == 0 {
            let why = format!(
                "devicetaintrules.resource.k8s.io \"{name}\" is forbidden: exceeded quota on purpose (the fake server)"
            );
            return (403, status_body(403, "Forbidden", &why));
        }
        *left -= 1;
    }
    if s.collections.get(rules).is_some_and(|c| c.objects.contains_key(&format!("/{name}"))) {
        let why = format!("devicetaintrules.resource.k8s.io \"{name}\" already exists");
        return (409, status_body(409, "AlreadyExists", &why));
    }
    obj["metadata"]["uid"] = json!(format!("uid-{name}"));
    obj["metadata"]["creationTimestamp"] = json!("2026-08-20T06:00:00Z");
    (201, s.upsert(rules, obj).to_string())
}
