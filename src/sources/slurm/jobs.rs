//! Slurm jobs (`squeue --json`, slurmrestd `/jobs`) to workloads: state and reason, what the
//! job asked for (GPU count, model or MIG profile from its TRES), and the cards it holds from
//! `gres_detail` (one entry per allocated node, device indexes in `IDX:`).

use serde_json::Value;

use super::gres::{self, Gres};
use super::json::{hostlist, num, states, text, time};
use crate::model::KindRules;
use crate::model::{CardRef, Request, ShareUnit, Shares, Workload, WorkloadState};

/// What `map` found.
#[derive(Debug, Default)]
pub struct Jobs {
    pub workloads: Vec<Workload>,
    /// Job objects without an id.
    pub unreadable: usize,
    /// Waiting or running jobs that want no GPU: counted, not shown (this is a GPU console).
    pub without_gpu: usize,
    /// Shares of cards running jobs hold (`shard:2(IDX:0)`): card (GRES index), unit, count.
    pub shares: Vec<(CardRef, ShareUnit, u32)>,
    /// Nodes where a running job holds shares that `gres_detail` does not place on a card:
    /// their cards' shares in use are unknown.
    pub unplaced: Vec<String>,
    /// GPU jobs past `MAX_JOBS`: counted, not read.
    pub cut: usize,
}

/// The most GPU jobs read from one answer (Slurm's default `MaxJobCount` is 10,000; the
/// largest sites run some 100,000 at once).
pub const MAX_JOBS: usize = 200_000;

/// The share unit of a sharing GRES name.
pub fn share_unit(name: &str) -> Option<ShareUnit> {
    match name {
        "shard" => Some(ShareUnit::Replica),
        "mps" => Some(ShareUnit::Mps),
        _ => None,
    }
}

/// Map every GPU job that waits or holds resources. Finished jobs (still listed for
/// MinJobAge) hold nothing and are left out.
pub fn map(doc: &Value, kinds: &KindRules) -> Jobs {
    let mut out = Jobs::default();
    for job in doc.get("jobs").and_then(Value::as_array).into_iter().flatten() {
        add(&mut out, job, kinds);
    }
    out
}

/// Map one job into `out` (the streamed reader's step, `stream.rs`).
pub fn add(out: &mut Jobs, job: &Value, kinds: &KindRules) {
    if out.workloads.len() >= MAX_JOBS {
        out.cut += 1;
        return;
    }
    match workload(job, kinds, &mut out.shares, &mut out.unplaced) {
        Some(Some(w)) if w.request.wants_gpu() => {
            out.workloads.push(w);
        }
        Some(Some(_)) => out.without_gpu += 1,
        Some(None) => {}
        None => out.unreadable += 1,
    }
}

/// `None` for a job without an id; `Some(None)` for a finished job.
fn workload(
    job: &Value,
    kinds: &KindRules,
    shares: &mut Vec<(CardRef, ShareUnit, u32)>,
    unplaced: &mut Vec<String>,
) -> Option<Option<Workload>> {
    let id = num(job.get("job_id"))?;
    let st = states(job.get("job_state"), None);
    let Some(state) = state_of(&st) else { return Some(None) };
    let partition = text(job.get("partition")).unwrap_or_default();
    let qos = text(job.get("qos")).unwrap_or_default();
    let request = request(job);
    let wants_gpu = request.wants_gpu();
    let kind = kinds.classify([partition, qos], wants_gpu);
    let name = text(job.get("name")).unwrap_or("(no name)");
    let (id, name, tasks) = array_identity(job, id, name);
    let mut request = request;
    if tasks > 1 {
        let times = u32::try_from(tasks).unwrap_or(u32::MAX);
        request.gpus = request.gpus.map(|g| g.saturating_mul(times));
        if let Some(s) = request.shares.as_mut() {
            s.count = s.count.saturating_mul(times);
        }
    }
    let mut w = Workload::new(format!("slurm:{id}"), name, kind, state);
    w.owner = text(job.get("user_name")).map(str::to_string);
    w.requeueable = job.get("requeue").and_then(Value::as_bool);
    w.priority = num(job.get("priority"));
    w.submitted_at = time(job.get("submit_time"));
    w.request = request;
    let reason = text(job.get("state_reason")).filter(|r| *r != "None");
    w.reason = match (state, reason) {
        (WorkloadState::Pending, Some(r)) => Some(r.to_string()),
        (WorkloadState::Pending, None) => Some("Pending".into()),
        (_, r) if st.iter().any(|s| s == "SUSPENDED") => Some(r.unwrap_or("suspended").to_string()),
        _ => None,
    };
    if state.is_active() {
        w.started_at = time(job.get("start_time"));
        hold_cards(&mut w, job, shares, unplaced);
    }
    Some(Some(w))
}

/// The job's id, name and how many tasks its record stands for. An array task is
/// `ARRAY_TASK` to Slurm's commands; a pending array record stands for all its waiting tasks
/// (`0-99%4`), so its request counts every one of them.
fn array_identity(job: &Value, id: i64, name: &str) -> (String, String, usize) {
    let array = num(job.get("array_job_id")).filter(|&a| a > 0);
    match (array, num(job.get("array_task_id"))) {
        (Some(a), Some(t)) => (format!("{a}_{t}"), name.to_string(), 1),
        (Some(_), None) => match text(job.get("array_task_string")) {
            Some(range) => {
                let range = range.split('%').next().unwrap_or(range);
                let n = gres::index_list(range).map_or(1, |v| v.len().max(1));
                (id.to_string(), format!("{name}[{range}]"), n)
            }
            None => (id.to_string(), name.to_string(), 1),
        },
        _ => (id.to_string(), name.to_string(), 1),
    }
}

/// The node and cards a running job holds, from `nodes` and `gres_detail`; the shares it
/// holds on one card go to `shares`, and the nodes where they are not placed on one card to
/// `unplaced`.
fn hold_cards(w: &mut Workload, job: &Value, shares: &mut Vec<(CardRef, ShareUnit, u32)>, unplaced: &mut Vec<String>) {
    let nodes = text(job.get("nodes")).map(hostlist).unwrap_or_default();
    w.node = nodes.first().cloned();
    let detail: Vec<&str> =
        job.get("gres_detail").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    // gres_detail lists allocated nodes in the job's node order.
    // Nodes on which this job's shares were placed on one card.
    let mut placed: Vec<&String> = Vec::new();
    for (node, d) in nodes.iter().zip(detail.iter().copied()) {
        for g in gres::parse(d).iter().filter(|g| g.name == "gpu" && g.mig_profile().is_none()) {
            for &i in g.indexes.iter().flatten() {
                w.cards.push(CardRef::new(node.clone(), i));
            }
        }
        for g in gres::parse(d) {
            let (Some(unit), Some(idx)) = (share_unit(&g.name), g.indexes.as_ref()) else { continue };
            // Each card once, however the list repeats it.
            let mut idx = idx.clone();
            idx.sort_unstable();
            idx.dedup();
            for &i in &idx {
                let card = CardRef::new(node.clone(), i);
                if !w.cards.contains(&card) {
                    w.cards.push(card);
                }
            }
            match idx.as_slice() {
                [i] => {
                    shares.push((CardRef::new(node.clone(), *i), unit, u32::try_from(g.count).unwrap_or(u32::MAX)));
                    placed.push(node);
                }
                // Spread over several cards (MULTIPLE_SHARING_GRES_PJ), Slurm does not say
                // how many on each: those cards' shares in use are unknown.
                _ if !unplaced.contains(node) => unplaced.push(node.clone()),
                _ => {}
            }
        }
    }
    // A node of a share job with no share placed there (no gres_detail for it, or spread
    // over cards): its shares in use are unknown.
    if w.request.shares.is_some() {
        for n in nodes.iter().filter(|n| !placed.contains(n)) {
            if !unplaced.contains(n) {
                unplaced.push(n.clone());
            }
        }
    }
}

fn state_of(st: &[String]) -> Option<WorkloadState> {
    let has = |s: &str| st.iter().any(|x| x == s);
    if has("COMPLETING") {
        return Some(WorkloadState::Completing);
    }
    let base = st.first().map(String::as_str).unwrap_or("UNKNOWN");
    Some(match base {
        "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" => WorkloadState::Pending,
        "RUNNING" | "CONFIGURING" | "RESIZING" | "SIGNALING" | "STAGE_OUT" => WorkloadState::Running,
        "SUSPENDED" | "STOPPED" => WorkloadState::Unknown,
        "COMPLETED" | "CANCELLED" | "FAILED" | "TIMEOUT" | "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE"
        | "OUT_OF_MEMORY" | "SPECIAL_EXIT" | "REVOKED" => return None,
        _ => WorkloadState::Unknown,
    })
}

/// GPUs the job asked for: per job, per node (× nodes), per task (× tasks), else from the
/// requested TRES (`gres/gpu=2`, present where accounting tracks it).
fn request(job: &Value) -> Request {
    let gpus_in = |field: &str| -> Vec<Gres> {
        text(job.get(field)).map(gres::parse).unwrap_or_default().into_iter().filter(|g| g.name == "gpu").collect()
    };
    let nodes = num(job.get("node_count")).filter(|&n| n > 0).unwrap_or(1);
    let tasks = num(job.get("tasks")).or_else(|| num(job.get("num_tasks"))).filter(|&n| n > 0).unwrap_or(1);
    let candidates = [("tres_per_job", 1), ("tres_per_node", nodes), ("tres_per_task", tasks), ("tres_req_str", 1)];
    let mut r = Request::default();
    for (field, times) in candidates {
        let g = gpus_in(field);
        if g.is_empty() {
            // --gres=shard:N or --gres=mps:N: a share of one card (per node).
            let all = text(job.get(field)).map(gres::parse).unwrap_or_default();
            if let Some((unit, g)) = all.iter().find_map(|g| share_unit(&g.name).map(|u| (u, g))) {
                let total = g.count.saturating_mul(u64::try_from(times).unwrap_or(1));
                r.shares = Some(Shares { unit, count: u32::try_from(total).unwrap_or(u32::MAX) });
                r.model = g.kind.clone();
                break;
            }
            continue;
        }
        let per: u64 = g.iter().map(|x| x.count).sum();
        let total = per.saturating_mul(u64::try_from(times).unwrap_or(1));
        r.gpus = Some(u32::try_from(total).unwrap_or(u32::MAX));
        if let Some(kind) = g.iter().find_map(|x| x.kind.as_deref()) {
            match gres::mig_profile(kind) {
                Some(p) => r.mig_profile = Some(p),
                None => r.model = Some(kind.to_string()),
            }
        }
        break;
    }
    r.host_memory_mib = num(job.get("memory_per_node")).and_then(|m| u64::try_from(m).ok()).filter(|&m| m > 0);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(job: Value) -> Workload {
        let j = map(&json!({ "jobs": [job] }), &KindRules::default());
        assert_eq!(j.unreadable, 0);
        j.workloads.into_iter().next().unwrap_or_else(|| panic!("no workload"))
    }

    #[test]
    fn old_dialect_pending_job() {
        let w = one(json!({"job_id": 7, "name": "llm", "job_state": "PENDING", "state_reason": "Resources",
            "partition": "training", "qos": "normal", "priority": 4294901758u64, "submit_time": 1_700_000_000,
            "start_time": 0, "user_name": "ana", "nodes": "", "gres_detail": [], "tres_per_node": "gres:gpu:h100:2",
            "node_count": 2}));
        assert_eq!(w.id, "slurm:7");
        assert_eq!(w.state, WorkloadState::Pending);
        assert_eq!(w.reason.as_deref(), Some("Resources"));
        assert_eq!(w.request.gpus, Some(4), "per node × nodes");
        assert_eq!(w.request.model.as_deref(), Some("h100"));
        assert_eq!(w.kind, crate::model::WorkloadKind::Training);
        assert_eq!(w.owner.as_deref(), Some("ana"));
        assert_eq!(w.requeueable, None);
        let w = one(json!({"job_id": 8, "job_state": "RUNNING", "requeue": false, "tres_per_job": "gres/gpu:1"}));
        assert_eq!(w.requeueable, Some(false));
        assert!(w.started_at.is_none() && w.cards.is_empty());
    }

    #[test]
    fn new_dialect_running_multi_node_job() {
        let w = one(json!({"job_id": 795, "name": "wrap", "job_state": ["RUNNING"], "state_reason": "None",
            "partition": "inference", "priority": {"set": true, "infinite": false, "number": 9},
            "start_time": {"set": true, "infinite": false, "number": 1_700_000_100}, "nodes": "ia[1-2]",
            "gres_detail": ["gpu:h100:1(IDX:0),gpu:h200:0(IDX:)", "gpu:h100:1(IDX:1)"], "tres_per_job": "gres/gpu:2"}));
        assert_eq!(w.state, WorkloadState::Running);
        assert_eq!(w.reason, None);
        assert_eq!(w.kind, crate::model::WorkloadKind::Inference);
        assert_eq!(w.priority, Some(9));
        assert_eq!(w.node.as_deref(), Some("ia1"));
        assert_eq!(w.cards, vec![CardRef::new("ia1", 0), CardRef::new("ia2", 1)]);
    }

    #[test]
    fn mig_gres_and_tres_fallback() {
        let w = one(json!({"job_id": 1, "job_state": "PENDING", "tres_per_node": "gres:gpu:a100_3g.20gb:1"}));
        assert_eq!((w.request.mig_profile.as_deref(), w.request.gpus), (Some("3g.20gb"), Some(1)));
        let w = one(json!({"job_id": 2, "job_state": "PENDING", "tres_req_str": "cpu=1,mem=1G,gres/gpu=3",
            "state_reason": "None"}));
        assert_eq!(w.request.gpus, Some(3));
        assert_eq!(w.reason.as_deref(), Some("Pending"), "a pending job always says why");
    }

    #[test]
    fn array_tasks_and_pending_arrays() {
        let w = one(json!({"job_id": 124, "array_job_id": 120, "array_task_id": 4, "job_state": "RUNNING",
            "name": "sweep", "tres_per_job": "gres/gpu:1"}));
        assert_eq!(w.id, "slurm:120_4", "scancel and scontrol take ARRAY_TASK");
        let w = one(json!({"job_id": 120, "array_job_id": 120, "array_task_id": null, "array_task_string": "5-9%2",
            "job_state": "PENDING", "name": "sweep", "tres_per_node": "gres:gpu:2"}));
        assert_eq!((w.id.as_str(), w.name.as_str(), w.request.gpus), ("slurm:120", "sweep[5-9]", Some(10)));
        let w = one(json!({"job_id": 7, "array_job_id": 0, "job_state": "PENDING", "tres_per_node": "gres:gpu:1"}));
        assert_eq!(w.id, "slurm:7");
    }

    #[test]
    fn finished_and_unreadable_jobs() {
        let gpu = "gres/gpu:1";
        let doc = json!({"jobs": [{"job_id": 1, "job_state": "COMPLETED", "tres_per_job": gpu},
            {"job_state": "RUNNING"}, {"job_id": 3, "job_state": ["RUNNING", "COMPLETING"], "tres_per_job": gpu},
            "nonsense", {"job_id": 4, "job_state": 12, "tres_per_job": gpu}, {"job_id": 5, "job_state": "RUNNING"}]});
        let j = map(&doc, &KindRules::default());
        assert_eq!(j.unreadable, 2, "no id twice");
        assert_eq!(j.without_gpu, 1);
        assert_eq!(j.workloads.len(), 2);
        assert_eq!(j.workloads[0].state, WorkloadState::Completing);
        assert_eq!(j.workloads[1].state, WorkloadState::Unknown);
        assert_eq!(map(&json!({"jobs": 5}), &KindRules::default()).workloads.len(), 0);
    }

    #[test]
    fn shard_requests_arrays_and_unplaced_shares() {
        use crate::model::{ShareUnit, Shares};
        let w = one(json!({"job_id": 3, "job_state": "PENDING", "tres_per_node": "gres:shard:2"}));
        assert_eq!((w.request.gpus, w.request.shares), (None, Some(Shares { unit: ShareUnit::Replica, count: 2 })));
        let w = one(json!({"job_id": 4, "job_state": "PENDING", "tres_per_node": "gres:mps:50"}));
        assert_eq!(w.request.shares, Some(Shares { unit: ShareUnit::Mps, count: 50 }));
        // A pending array of 4 tasks asks for every task's shards.
        let w = one(json!({"job_id": 5, "array_job_id": 5, "job_state": "PENDING", "array_task_string": "0-3",
            "tres_per_node": "gres:shard:1"}));
        assert_eq!(w.request.shares.map(|s| s.count), Some(4));
        // Running: one card, counted once however IDX repeats it; a job over two cards or with
        // no gres_detail leaves its node's shares in use unknown.
        let run = |detail: Value| {
            map(
                &json!({"jobs": [{"job_id": 6, "job_state": "RUNNING", "nodes": "n1", "tres_per_node": "gres:shard:2",
                    "gres_detail": detail}]}),
                &KindRules::default(),
            )
        };
        let j = run(json!(["shard:2(IDX:1,1)"]));
        assert_eq!(j.shares, vec![(CardRef::new("n1", 1), ShareUnit::Replica, 2)]);
        assert!(j.unplaced.is_empty());
        let j = run(json!(["shard:2(IDX:0-1)"]));
        assert!(j.shares.is_empty());
        assert_eq!(j.unplaced, vec!["n1".to_string()]);
        assert_eq!(j.workloads[0].cards.len(), 2, "it holds both cards");
        assert_eq!(run(json!([])).unplaced, vec!["n1".to_string()]);
    }
}
