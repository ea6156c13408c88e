//! The visibility API's answer as Kueue's docs show it (tests/fixtures/kubernetes/kueue), the
//! queues worth asking, and the note when positions are missing.

use serde_json::{Value, json};

use super::*;

fn sample() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kubernetes/kueue/pendingworkloadssummary.clusterqueue.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
}

fn summary(v: Value) -> Summary {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn key(ns: &str, name: &str) -> (String, String) {
    (ns.into(), name.into())
}

#[test]
fn the_documented_summary_gives_three_positions() {
    let got = positions(summary(sample()), "elsewhere");
    let first = Position { cluster_queue: 0, local_queue: 0, priority: Some(0) };
    assert_eq!(
        got,
        [
            (key("default", "job-sample-job-jrjfr-8d56e"), first),
            (key("default", "job-sample-job-jg9dw-5f1a3"), Position { cluster_queue: 1, local_queue: 1, ..first }),
            (key("default", "job-sample-job-t9b8m-4e770"), Position { cluster_queue: 2, local_queue: 2, ..first }),
        ]
    );
    // The API counts from 0; people from 1.
    assert_eq!(first.describe(), "position 1 in cluster queue, 1 in local queue");
    let later = Position { cluster_queue: 2, local_queue: 0, priority: None };
    assert_eq!(later.describe(), "position 3 in cluster queue, 1 in local queue");
}

#[test]
fn odd_items_are_skipped_not_fatal() {
    // Go writes an empty list as null.
    assert!(positions(summary(json!({"kind": "PendingWorkloadsSummary", "items": null})), "ns").is_empty());
    assert!(positions(summary(json!({})), "ns").is_empty());
    let mut v = sample();
    v["items"][0]["metadata"]["namespace"] = Value::Null;
    v["items"][0]["metadata"]["ownerReferences"] = json!([{"name": "no uid"}]);
    v["items"][1]["positionInClusterQueue"] = json!(-1);
    v["items"][2]["metadata"]["name"] = json!("");
    if let Some(items) = v["items"].as_array_mut() {
        items.push(json!({"metadata": {"name": "no-positions"}}));
    }
    let got = positions(summary(v), "team-a");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, key("team-a", "job-sample-job-jrjfr-8d56e"), "the queue's namespace stands in");
    assert!(serde_json::from_value::<Summary>(json!({"items": [{"positionInLocalQueue": "3"}]})).is_err());
}

fn workload(ns: &str, name: &str, queue: &str, gpus: bool, status: Value) -> std::sync::Arc<KueueWorkload> {
    let limits = if gpus { json!({"nvidia.com/gpu": 1}) } else { json!({"cpu": 1}) };
    let v = json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"limits": limits}}]}}}]},
        "status": status
    });
    std::sync::Arc::new(serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn only_queues_with_pending_gpu_workloads_are_asked() {
    let pending = json!({"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]});
    let admitted = json!({"conditions": [{"type": "QuotaReserved", "status": "True"}], "admission": {}});
    let all = [
        workload("team-a", "w1", "user-queue", true, pending.clone()),
        workload("team-a", "w2", "user-queue", true, pending.clone()),
        workload("team-b", "w3", "user-queue", true, pending.clone()),
        workload("team-b", "done", "other", true, admitted),
        workload("team-b", "cpu", "cpu-queue", false, pending.clone()),
        workload("team-b", "odd", "../../x?y", true, pending.clone()),
        workload("team-b", "none", "", true, pending),
    ];
    let got = wanted(&all);
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        got,
        Wanted::from([
            (key("team-a", "user-queue"), names(&["w1", "w2"])),
            (key("team-b", "user-queue"), names(&["w3"])),
        ])
    );
}

#[tokio::test]
async fn the_note_names_the_first_failing_queue_and_counts_the_rest() {
    let uri = "http://127.0.0.1:9".parse().unwrap_or_else(|e| panic!("{e}"));
    let client = Client::try_from(kube::Config::new(uri)).unwrap_or_else(|e| panic!("{e}"));
    let mut v = Visibility::new(client, "http://127.0.0.1:9".into());
    assert_eq!(v.known().note, None);
    v.asked = true;
    let at = Position { cluster_queue: 4, local_queue: 0, priority: None };
    v.queues.insert(key("a", "q"), Ok(vec![(key("a", "w"), at)]));
    assert_eq!(v.known().note, None);
    assert_eq!(v.known().positions.get(&key("a", "w")), Some(&at));
    let forbidden = |q: &str| Failure::new(format!("http://127.0.0.1:9 answered HTTP 403 Forbidden: {q}"), RECHECK);
    v.queues.insert(key("b", "q1"), Err(forbidden("q1")));
    assert_eq!(
        v.known().note.as_deref(),
        Some("Kueue positions unavailable for b/q1: http://127.0.0.1:9 answered HTTP 403 Forbidden: q1")
    );
    v.queues.insert(key("b", "q2"), Err(forbidden("q2")));
    v.queues.insert(key("c", "q3"), Err(Failure::late("http://127.0.0.1:9", "c/q3")));
    let note = v.known().note.unwrap_or_default();
    assert!(note.starts_with("Kueue positions unavailable for b/q1 (and 2 more queues): "), "{note}");
    assert_eq!(v.known().positions.len(), 1, "a failing queue does not hide the others");
    v.discovery = Some(Failure::new("http://127.0.0.1:9 does not serve visibility.kueue.x-k8s.io".into(), RECHECK));
    assert_eq!(
        v.known().note.as_deref(),
        Some("Kueue positions unavailable: http://127.0.0.1:9 does not serve visibility.kueue.x-k8s.io")
    );
    // With nothing pending there is nothing to explain.
    v.asked = false;
    assert_eq!(v.known().note, None);
}
