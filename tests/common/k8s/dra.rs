//! Dynamic Resource Allocation in the fake API server: the resource.k8s.io group in discovery
//! (v1, and v1beta2 with DeviceTaintRules where served), its collections listed and watched
//! like the others, and the DRA fixtures (tests/fixtures/dra/) loaded with the Node objects
//! they lack: DRA nodes advertise no `nvidia.com/gpu`.

use serde_json::{Value, json};

use super::{FakeK8s, NODES, PODS, State};

pub const GROUP: &str = "resource.k8s.io";
pub const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
pub const CLAIMS: &str = "/apis/resource.k8s.io/v1/resourceclaims";
pub const TEMPLATES: &str = "/apis/resource.k8s.io/v1/resourceclaimtemplates";
pub const DEVICE_CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
pub const TAINT_RULES: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
/// Every DRA collection.
pub const ALL: [&str; 5] = [SLICES, CLAIMS, TEMPLATES, DEVICE_CLASSES, TAINT_RULES];

/// A fixture file of tests/fixtures/dra/.
pub fn fixture(name: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dra").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The items of a fixture's List.
pub fn items(name: &str) -> Vec<Value> {
    fixture(name)["items"].as_array().cloned().unwrap_or_default()
}

/// A Ready node as a DRA cluster has it: no GPU resources, no GPU labels.
pub fn node(name: &str, control_plane: bool) -> Value {
    let mut n = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "190", "memory": "2000Gi", "pods": "110"},
            "capacity": {"cpu": "192", "memory": "2015Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}});
    if control_plane {
        n["spec"]["taints"] = json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]);
    }
    n
}

impl FakeK8s {
    /// Serve resource.k8s.io (`rules`: DeviceTaintRules too), or not at all.
    pub fn set_dra(&self, served: Option<bool>) {
        self.with(|s| s.dra = served);
    }

    /// Let `n` more DeviceTaintRule creations succeed, then refuse every one (403); `None`:
    /// no limit.
    pub fn allow_rule_creates(&self, n: Option<usize>) {
        self.with(|s| s.rule_creates_left = n);
    }

    /// The names of the DeviceTaintRules held now.
    pub fn rule_names(&self) -> Vec<String> {
        self.with(|s| {
            let c = s.collections.get(TAINT_RULES);
            c.map(|c| c.objects.keys().map(|k| k.trim_start_matches('/').to_string()).collect()).unwrap_or_default()
        })
    }

    /// The fixtures' cluster: 3 nodes, the slices in the layout `slices` names (the files of
    /// tests/fixtures/dra/), claims, templates, classes, taint rules and pods.
    pub fn load_dra(&self, slices: &[&str]) {
        self.set_dra(Some(true));
        self.put(NODES, node("h100-dyn-01", false));
        self.put(NODES, node("h100-mig-01", false));
        self.put(NODES, node("cp-01", true));
        for f in slices {
            for s in items(f) {
                self.put(SLICES, s);
            }
        }
        let files = [
            (CLAIMS, "resourceclaims.json"),
            (TEMPLATES, "resourceclaimtemplates.json"),
            (DEVICE_CLASSES, "deviceclasses.json"),
            (TAINT_RULES, "devicetaintrules.json"),
            (PODS, "pods.json"),
        ];
        for (path, f) in files {
            for o in items(f) {
                self.put(path, o);
            }
        }
    }
}

/// Whether `path` is a DRA collection the server serves now.
pub(super) fn served(s: &State, path: &str) -> bool {
    match s.dra {
        None => false,
        Some(rules) => ALL.contains(&path) && (rules || path != TAINT_RULES),
    }
}

/// The group as /apis lists it, where served.
pub(super) fn group(s: &State) -> Option<Value> {
    let rules = s.dra?;
    let gv = |v: &str| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v});
    let mut versions = vec![gv("v1")];
    if rules {
        versions.push(gv("v1beta2"));
    }
    Some(json!({"name": GROUP, "versions": versions, "preferredVersion": gv("v1")}))
}

/// `/apis/resource.k8s.io/VERSION`, where served.
pub(super) fn resources(s: &State, path: &str) -> Option<Value> {
    let rules = s.dra?;
    let verbs = json!(["get", "list", "watch"]);
    let rule_verbs = json!(["create", "delete", "get", "list", "watch"]);
    let r = |name: &str, kind: &str, namespaced: bool| json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs});
    let (version, list) = match path.strip_prefix("/apis/resource.k8s.io/")? {
        "v1" => (
            "v1",
            vec![
                r("resourceslices", "ResourceSlice", false),
                r("resourceclaims", "ResourceClaim", true),
                r("resourceclaimtemplates", "ResourceClaimTemplate", true),
                r("deviceclasses", "DeviceClass", false),
            ],
        ),
        "v1beta2" if rules => {
            let mut rule = r("devicetaintrules", "DeviceTaintRule", false);
            rule["verbs"] = rule_verbs;
            ("v1beta2", vec![rule])
        }
        _ => return None,
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{version}"), "resources": list}),
    )
}
