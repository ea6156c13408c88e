//! Sources collect data and send whole updates to the owner loop; they never draw. This module
//! holds the message contract (`Partial`, `SourceUpdate`, `SourceError`) and the backoff; the
//! engine spawns the sources.

mod allsmi;
pub mod budget;
pub mod dcgm;
pub mod exposition;
pub mod http;
pub mod kubernetes;
pub mod nvml;
pub mod prometheus;
pub mod scrape;
pub mod sim;
pub mod slurm;
pub mod tls;

use chrono::{DateTime, Utc};

use crate::model::{Event, Node, SourceKind, Workload};

/// What one collection of one source saw: a fragment of the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partial {
    pub nodes: Vec<Node>,
    pub workloads: Vec<Workload>,
    /// Events since the previous update.
    pub events: Vec<Event>,
    /// True when the data is simulated; the header then says SIMULATED.
    pub simulated: bool,
    /// Problems that did not stop the collection (bad lines skipped, say), for the status.
    pub note: Option<String>,
    /// History a source keeps (Prometheus), sent once; empty otherwise.
    pub history: Vec<crate::model::CardHistory>,
    /// Demand by hour a source measured before it started (the simulator's previous day),
    /// sent once: it seeds the store's.
    pub demand: Option<crate::model::demand::DemandHistory>,
    /// Nothing changed since the source's previous update (the simulator between its
    /// five-second steps): the update says only that the source is alive, and the store keeps
    /// the data it has instead of merging the same fleet again.
    pub unchanged: bool,
}

impl Partial {
    /// An update that says the source is alive and its data are as last sent.
    pub fn unchanged() -> Self {
        Partial { unchanged: true, ..Partial::default() }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SourceError {
    pub message: String,
    /// The source cannot work at all (no library, bad address); else it may recover.
    pub fatal: bool,
}

/// One message from a source task to the owner loop.
#[derive(Debug, Clone)]
pub struct SourceUpdate {
    pub source: String,
    pub kind: SourceKind,
    pub at: DateTime<Utc>,
    pub result: Result<Partial, SourceError>,
}

/// Capped exponential backoff for a failing source: base, 2×, 4×, … up to `max`.
pub fn backoff(base: std::time::Duration, failures: u32, max: std::time::Duration) -> std::time::Duration {
    let factor = 1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_then_caps() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(1), 0, s(60)), s(1));
        assert_eq!(backoff(s(1), 3, s(60)), s(8));
        assert_eq!(backoff(s(1), 10, s(60)), s(60));
        assert_eq!(backoff(s(1), u32::MAX, s(60)), s(60));
    }
}
