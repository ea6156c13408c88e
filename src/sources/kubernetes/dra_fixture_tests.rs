//! The DRA fixtures of tests/fixtures/dra/ (their README names the source of every shape) as
//! the Kubernetes source maps them, with the Node objects they lack, for the unit tests of
//! the layers above (the actions' plans, the advisor): a fleet as the console would hold it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::model::{Fleet, SourceKind};

/// The slices of the node under DynamicMIG (the split layout) and of the static MIG node.
pub const SLICES: [&str; 2] = ["resourceslices.h100-dynamicmig.json", "resourceslices.h100-static-mig.json"];

/// A fixture file's items.
pub fn items(name: &str) -> Vec<Value> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dra").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    v["items"].as_array().cloned().unwrap_or_default()
}

/// A Ready node as a DRA cluster has it: no GPU resources.
fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {}, "status": {"allocatable": {"cpu": "190", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// The objects as `kubernetes::from_json` reads them; `rules`: the server serves
/// DeviceTaintRules (the fixture's 27 are listed), else the document has no such list.
pub fn doc(rules: bool) -> Value {
    let mut d = json!({
        "nodes": [node("h100-dyn-01"), node("h100-mig-01")],
        "pods": items("pods.json"),
        "resourceslices": SLICES.iter().flat_map(|f| items(f)).collect::<Vec<_>>(),
        "resourceclaims": items("resourceclaims.json"),
        "resourceclaimtemplates": items("resourceclaimtemplates.json"),
        "deviceclasses": items("deviceclasses.json"),
    });
    if rules {
        d["devicetaintrules"] = Value::Array(items("devicetaintrules.json"));
    }
    d
}

/// The fleet the console would show from `doc`, source `kubernetes` live at `now`.
pub fn fleet_of(doc: &Value, now: DateTime<Utc>) -> Fleet {
    let partial = super::from_json(doc);
    let mut store = crate::store::Store::new();
    store.register("kubernetes", SourceKind::Kubernetes, Duration::from_secs(5));
    let update = crate::sources::SourceUpdate {
        source: "kubernetes".into(),
        kind: SourceKind::Kubernetes,
        at: now,
        result: Ok(partial),
    };
    store.apply(update, now);
    store.fleet().clone()
}

/// The fixtures' fleet, DeviceTaintRules served.
pub fn fleet(now: DateTime<Utc>) -> Fleet {
    fleet_of(&doc(true), now)
}
