//! The queue summary: how many wait, for how long, and for what, against what is free.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::fleet::Fleet;
use super::workload::WorkloadState;

/// Something a pending workload waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Resource {
    /// A whole card; `model` is a catalog model name, or `None` for any model.
    WholeCard {
        model: Option<String>,
    },
    MigInstance {
        profile: String,
    },
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::WholeCard { model: Some(m) } => write!(f, "whole {m}"),
            Self::WholeCard { model: None } => f.write_str("whole (any)"),
            Self::MigInstance { profile } => write!(f, "MIG {profile}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Demand {
    pub resource: Resource,
    /// Pending workloads that want this resource.
    pub pending: usize,
    /// Units they want in total (cards or instances).
    pub wanted: u64,
    /// Units free right now.
    pub free: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSummary {
    pub pending: usize,
    pub oldest_wait_s: Option<i64>,
    pub demand: Vec<Demand>,
}

impl QueueSummary {
    pub fn compute(fleet: &Fleet, now: DateTime<Utc>) -> Self {
        let pending: Vec<_> = fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending).collect();
        let oldest_wait_s = pending.iter().filter_map(|w| w.wait(now)).map(|d| d.num_seconds().max(0)).max();

        let free = super::capacity::Free::compute(fleet);

        let mut demand: BTreeMap<Resource, (usize, u64)> = BTreeMap::new();
        for w in &pending {
            let (resource, units) = match (&w.request.mig_profile, w.request.gpus) {
                (Some(p), n) => (Resource::MigInstance { profile: p.clone() }, u64::from(n.unwrap_or(1))),
                (None, n) => (
                    Resource::WholeCard { model: w.request.model.as_deref().map(super::capacity::model_key) },
                    u64::from(n.unwrap_or(1)),
                ),
            };
            let e = demand.entry(resource).or_default();
            e.0 += 1;
            e.1 += units;
        }
        let demand = demand
            .into_iter()
            .map(|(resource, (pending, wanted))| {
                let free = free.of(&resource);
                Demand { resource, pending, wanted, free }
            })
            .collect();
        Self { pending: pending.len(), oldest_wait_s, demand }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Card, MigInstance, Node, Workload, WorkloadKind};
    use chrono::TimeZone;

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
            nodes: vec![Node { name: "n1".into(), schedulable: true, cards: vec![mig, whole], ..Node::default() }],
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
