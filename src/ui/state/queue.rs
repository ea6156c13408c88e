//! The queue view's state: the waiting workloads' rows and the summary the header shows.

use super::list::List;
use crate::model::{Fleet, Workload, WorkloadState};

/// The queue's rows (indexes of pending workloads) and its summary.
#[derive(Debug, Default)]
pub struct QueueList {
    pub list: List<usize>,
    /// The queue summary, computed once per fleet update, not per frame.
    pub summary: crate::model::QueueSummary,
}

/// The pending workloads `shown` lets through, the highest priority first, then the longest
/// waiting.
pub fn rows(fleet: &Fleet, shown: impl Fn(&Workload) -> bool) -> Vec<usize> {
    let mut pending: Vec<usize> = (0..fleet.workloads.len())
        .filter(|&i| fleet.workloads[i].state == WorkloadState::Pending && shown(&fleet.workloads[i]))
        .collect();
    pending.sort_by_key(|&i| {
        let w = &fleet.workloads[i];
        (std::cmp::Reverse(w.priority), w.submitted_at, i)
    });
    pending
}
