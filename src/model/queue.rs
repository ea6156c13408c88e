//! The queue summary: how many wait, for how long, and for what, against what is free.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::fleet::Fleet;
use super::resource::Resource;
use super::workload::WorkloadState;

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Demand {
    pub resource: Resource,
    /// Pending workloads that want this resource.
    pub pending: usize,
    /// Units they want in total (cards or instances).
    pub wanted: u64,
    /// Units free right now.
    pub free: u64,
    /// The most units one pending workload wants (a multi-GPU job needs them on one node).
    pub largest_request: u64,
    /// The most free units on any one node (for a share: on one card, where known).
    pub largest_block: u64,
    /// Of `free`, the units that are replicas of shared cards (time-slicing or MPS).
    pub replicas: u64,
}

impl Demand {
    /// Free units exist, but no node has enough of them together for the largest request.
    pub fn scattered(&self) -> bool {
        self.largest_request > self.largest_block && self.free >= self.largest_request
    }
}

/// Whether the queue on screen can be believed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum QueueKnown {
    /// A queue source answered.
    #[default]
    Known,
    /// No source that reports a queue is configured.
    NoScheduler,
    /// Every queue source is down or has not answered: the queue is unknown, not empty.
    Unknown { reason: String },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct QueueSummary {
    pub known: QueueKnown,
    pub pending: usize,
    pub oldest_wait_s: Option<i64>,
    pub demand: Vec<Demand>,
}

impl QueueKnown {
    pub fn of(fleet: &Fleet) -> Self {
        use super::source::SourceHealth;
        let queue: Vec<_> = fleet.sources.iter().filter(|s| s.queue).collect();
        if queue.is_empty() {
            return Self::NoScheduler;
        }
        if queue.iter().any(|s| matches!(s.health, SourceHealth::Live { .. } | SourceHealth::Stale { .. })) {
            return Self::Known;
        }
        let why: Vec<String> = queue
            .iter()
            .map(|s| match &s.health {
                SourceHealth::Unavailable { reason } => format!("{} unavailable: {reason}", s.name),
                _ => format!("{} has not answered yet", s.name),
            })
            .collect();
        Self::Unknown { reason: why.join("; ") }
    }

    /// The pending count as the header shows it: a number, `?` or `n/a`.
    pub fn count_text(&self, pending: usize) -> String {
        match self {
            Self::Known => pending.to_string(),
            Self::NoScheduler => "n/a".into(),
            Self::Unknown { .. } => "?".into(),
        }
    }
}

impl QueueSummary {
    pub fn compute(fleet: &Fleet, now: DateTime<Utc>) -> Self {
        Self::with_free(fleet, now, &super::capacity::Free::compute(fleet))
    }

    /// The same, with the fleet's free capacity already worked out (the advisor does once).
    pub fn with_free(fleet: &Fleet, now: DateTime<Utc>, free: &super::capacity::Free) -> Self {
        let pending: Vec<_> = fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending).collect();
        let oldest_wait_s = pending.iter().filter_map(|w| w.wait(now)).map(|d| d.num_seconds().max(0)).max();

        let mut demand: BTreeMap<Resource, (usize, u64, u64)> = BTreeMap::new();
        for w in &pending {
            let (resource, units) = w.request.asks();
            let e = demand.entry(resource).or_default();
            e.0 += 1;
            e.1 += units;
            e.2 = e.2.max(units);
        }
        let demand = demand
            .into_iter()
            .map(|(resource, (pending, wanted, largest_request))| Demand {
                free: free.of(&resource),
                largest_block: free.largest_block(&resource),
                replicas: free.replicas_of(&resource),
                resource,
                pending,
                wanted,
                largest_request,
            })
            .collect();
        Self { known: QueueKnown::of(fleet), pending: pending.len(), oldest_wait_s, demand }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Card, MigInstance, Node, Workload, WorkloadKind};
    use chrono::TimeZone;

    #[test]
    fn a_down_scheduler_makes_the_queue_unknown_not_empty() {
        use crate::model::{SourceHealth, SourceKind, SourceStatus};
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).single().unwrap_or_default();
        let slurm = SourceStatus {
            name: "slurm".into(),
            kind: SourceKind::Slurm,
            health: SourceHealth::Unavailable { reason: "squeue: not found".into() },
            interval: std::time::Duration::from_secs(5),
            note: None,
            last_ok: None,
            reported: Default::default(),
            queue: true,
        };
        let mut f = Fleet { sources: vec![slurm], ..Fleet::default() };
        let q = QueueSummary::compute(&f, now);
        assert_eq!(q.known, QueueKnown::Unknown { reason: "slurm unavailable: squeue: not found".into() });
        assert_eq!(q.known.count_text(q.pending), "?");
        f.sources[0].health = SourceHealth::Live { at: now };
        assert_eq!(QueueSummary::compute(&f, now).known.count_text(0), "0");
        f.sources[0].queue = false;
        assert_eq!(QueueSummary::compute(&f, now).known, QueueKnown::NoScheduler);
    }

    #[test]
    fn free_cards_scattered_over_nodes_do_not_serve_a_job_wanting_them_together() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).single().unwrap_or_default();
        let node = |name: &str| Node {
            cards: (0..4)
                .map(|i| Card { index: i, model: "NVIDIA H100 80GB HBM3".into(), ..Card::default() })
                .collect(),
            ..Node::new(name)
        };
        let mut big = Workload::new("sim:1", "big", WorkloadKind::Training, WorkloadState::Pending);
        big.request.gpus = Some(8);
        let mut f = Fleet { nodes: vec![node("a"), node("b")], workloads: vec![big], ..Fleet::default() };
        f.index_workloads();
        let d = &QueueSummary::compute(&f, now).demand[0];
        assert_eq!((d.wanted, d.free, d.largest_request, d.largest_block), (8, 8, 8, 4));
        assert!(d.scattered());
    }

    #[test]
    fn demand_is_set_against_free_capacity() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).single().unwrap_or_default();
        let mut mig = Card { index: 0, model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        mig.mig.enabled = true;
        mig.mig.instances = vec![
            MigInstance { profile: "1g.10gb".into(), start: 0, size: 1, ..MigInstance::default() },
            MigInstance {
                profile: "1g.10gb".into(),
                start: 1,
                size: 1,
                workloads: vec!["sim:1".into()],
                ..MigInstance::default()
            },
        ];
        let whole = Card { index: 1, model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        let fleet = Fleet {
            nodes: vec![Node { cards: vec![mig, whole], ..Node::new("n1") }],
            workloads: vec![
                {
                    let mut w = Workload::new("sim:2", "a", WorkloadKind::Inference, WorkloadState::Pending);
                    w.request.mig_profile = Some("1g.10gb".into());
                    w.submitted_at = Some(now - chrono::Duration::minutes(20));
                    w
                },
                {
                    let mut w = Workload::new("sim:3", "b", WorkloadKind::Training, WorkloadState::Pending);
                    w.request.gpus = Some(4);
                    w.submitted_at = Some(now - chrono::Duration::minutes(5));
                    w
                },
            ],
            ..Fleet::default()
        };
        let q = QueueSummary::compute(&fleet, now);
        assert_eq!(q.pending, 2);
        assert_eq!(q.oldest_wait_s, Some(1200));
        assert_eq!(q.demand.len(), 2);
        let whole = &q.demand[0];
        assert_eq!(whole.resource, Resource::WholeCard { model: None });
        assert_eq!((whole.pending, whole.wanted, whole.free), (1, 4, 1));
        let mig = &q.demand[1];
        assert_eq!((mig.pending, mig.wanted, mig.free), (1, 1, 1));
    }
}
