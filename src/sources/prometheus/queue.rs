//! Queue metrics through Prometheus, when configured: pending pods that request GPUs, from
//! kube-state-metrics, and Kueue's pending-workload count.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{AnswerError, vector};
use crate::model::{Workload, WorkloadKind, WorkloadState};

pub const PENDING_PODS: &str = r#"kube_pod_status_phase{phase="Pending"} == 1"#;
pub const GPU_REQUESTS: &str = concat!(
    r#"kube_pod_container_resource_requests{resource=~"nvidia_com_gpu|nvidia_com_mig_.+"} "#,
    r#"and on(namespace, pod) (kube_pod_status_phase{phase="Pending"} == 1)"#
);
pub const POD_CREATED: &str =
    r#"kube_pod_created and on(namespace, pod) (kube_pod_status_phase{phase="Pending"} == 1)"#;
pub const KUEUE_PENDING: &str = "sum(kueue_pending_workloads)";

/// kube-state-metrics writes `nvidia.com/mig-1g.10gb` as `nvidia_com_mig_1g_10gb`: the
/// profile is the part after the prefix with its first `_` back to a `.`.
fn mig_profile(resource: &str) -> Option<String> {
    let rest = resource.strip_prefix("nvidia_com_mig_")?;
    let (g, mem) = rest.split_once('_')?;
    Some(format!("{g}.{}", mem.replace('_', "+")))
}

/// Pending GPU pods as pending workloads (`k8s:NS/POD`), with what they request and when
/// they were created. Pods that request no GPU are not in `requests` and are left out.
pub fn pending_workloads(pending: &str, requests: &str, created: &str) -> Result<Vec<Workload>, AnswerError> {
    let pending = vector(pending)?;
    let requests = vector(requests)?;
    let created = vector(created)?;
    let key = |m: &BTreeMap<String, String>| Some((m.get("namespace")?.clone(), m.get("pod")?.clone()));
    let mut out: BTreeMap<(String, String), Workload> = BTreeMap::new();
    for (m, value) in &requests {
        let Some(k) = key(m) else { continue };
        let resource = m.get("resource").map(String::as_str).unwrap_or_default();
        let w = out.entry(k.clone()).or_insert_with(|| {
            let mut w =
                Workload::new(format!("k8s:{}/{}", k.0, k.1), k.1.clone(), WorkloadKind::Other, WorkloadState::Pending);
            w.owner = Some(k.0.clone());
            w.reason = Some("Pending (kube-state-metrics)".into());
            w
        });
        let n = value.clamp(0.0, f64::from(u32::MAX)).round() as u32;
        // A pod asking for several MIG profiles keeps the first; the count adds up.
        if let Some(p) = mig_profile(resource) {
            w.request.mig_profile.get_or_insert(p);
        }
        w.request.gpus = Some(w.request.gpus.unwrap_or(0).saturating_add(n));
    }
    // Only pods still pending (the join in the query says so; this keeps a stale answer honest).
    let still: std::collections::HashSet<(String, String)> = pending.iter().filter_map(|(m, _)| key(m)).collect();
    out.retain(|k, _| still.contains(k));
    for (m, value) in &created {
        if let Some(w) = key(m).and_then(|k| out.get_mut(&k)) {
            w.submitted_at = DateTime::<Utc>::from_timestamp(*value as i64, 0);
        }
    }
    Ok(out.into_values().collect())
}

/// Kueue's pending workloads, summed over cluster queues; `None` without Kueue.
pub fn kueue_pending(body: &str) -> Option<u64> {
    let v = vector(body).ok()?;
    v.first().map(|(_, x)| x.max(0.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(series: &str) -> String {
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{series}]}}}}"#)
    }

    #[test]
    fn pending_gpu_pods_become_pending_workloads() {
        let pending = answer(
            r#"{"metric":{"namespace":"ml","pod":"train-0","phase":"Pending"},"value":[1,"1"]},
               {"metric":{"namespace":"web","pod":"svc-1","phase":"Pending"},"value":[1,"1"]},
               {"metric":{"namespace":"ml","pod":"cpu-only","phase":"Pending"},"value":[1,"1"]}"#,
        );
        let requests = answer(
            r#"{"metric":{"namespace":"ml","pod":"train-0","resource":"nvidia_com_gpu"},"value":[1,"4"]},
               {"metric":{"namespace":"web","pod":"svc-1","resource":"nvidia_com_mig_1g_10gb"},"value":[1,"1"]},
               {"metric":{"namespace":"gone","pod":"old","resource":"nvidia_com_gpu"},"value":[1,"1"]}"#,
        );
        let created = answer(r#"{"metric":{"namespace":"ml","pod":"train-0"},"value":[1,"1700000000"]}"#);
        let w = pending_workloads(&pending, &requests, &created).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.len(), 2, "no CPU-only pod, no pod that is no longer pending");
        assert_eq!(w[0].id, "k8s:ml/train-0");
        assert_eq!(w[0].request.gpus, Some(4));
        assert_eq!(w[0].submitted_at.map(|t| t.timestamp()), Some(1_700_000_000));
        assert_eq!(w[1].request.mig_profile.as_deref(), Some("1g.10gb"));
        assert!(w.iter().all(|w| w.state == WorkloadState::Pending));
        assert_eq!(mig_profile("nvidia_com_mig_1g_10gb_me").as_deref(), Some("1g.10gb+me"));
        assert_eq!(kueue_pending(&answer(r#"{"metric":{},"value":[1,"12"]}"#)), Some(12));
        assert_eq!(kueue_pending(&answer("")), None);
    }
}
