//! The queue view's state: the waiting workloads' rows and the summary the header shows.

use super::list::List;

/// The queue's rows (indexes of pending workloads) and its summary.
#[derive(Debug, Default)]
pub struct QueueList {
    pub list: List<usize>,
    /// The queue summary, computed once per fleet update, not per frame.
    pub summary: crate::model::QueueSummary,
}
