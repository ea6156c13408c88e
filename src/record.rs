//! Recordings: the merged fleet written as it changes (keyframes and deltas, zstd, checksummed,
//! indexed) and read back for replay and `snapshot --at`. The format is `docs/recording.md`.

pub mod format;
pub mod patch;
pub mod prometheus;
pub mod reader;
pub mod session;
pub mod tail;
pub mod writer;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::Fleet;
use crate::model::demand::DemandHistory;

/// One recorded moment: the merged fleet as the console saw it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Frame {
    /// When it was seen: the data's clock (the simulator's, or the wall clock for real sources).
    pub at: DateTime<Utc>,
    /// Any of it came from the simulated cluster.
    pub simulated: bool,
    pub fleet: Fleet,
    /// Demand by hour measured so far (the schedule suggestion's data), where it is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<DemandHistory>,
}

impl Frame {
    /// The store's merged fleet as a frame taken at `at` (its history and indexes are not
    /// recorded: a replay builds its own).
    pub fn from_store(store: &crate::store::Store, at: DateTime<Utc>) -> Self {
        let f = store.fleet();
        let fleet = Fleet {
            taken_at: f.taken_at,
            sources: f.sources.clone(),
            nodes: f.nodes.clone(),
            workloads: f.workloads.clone(),
            events: f.events.clone(),
            ..Fleet::default()
        };
        let demand = store.demand();
        Self { at, simulated: store.simulated(), fleet, demand: demand.last.is_some().then(|| demand.clone()) }
    }

    /// Some source was not live at this moment (an outage on the timeline). NVML found no GPU
    /// where the simulated cluster runs instead: that is how it started, not an outage.
    pub fn outage(&self) -> bool {
        use crate::model::{SourceHealth, SourceKind};
        self.fleet.sources.iter().any(|s| match &s.health {
            SourceHealth::Live { .. } => false,
            SourceHealth::Unavailable { .. } if self.simulated && s.kind == SourceKind::Nvml => false,
            _ => true,
        })
    }
}

/// An audited action as the recording keeps it: the audit log's record, at the data's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    pub at: DateTime<Utc>,
    pub record: serde_json::Value,
}

impl ActionRecord {
    /// One line for the timeline and the footer: `outcome drain node-3/0: done`.
    pub fn summary(&self) -> String {
        let r = &self.record;
        let text = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_str).map(str::to_string);
        let plan = r.get("plan");
        let action = r.get("action").or_else(|| plan.and_then(|p| p.get("action")));
        let mut out = text(r.get("record")).unwrap_or_else(|| "action".into());
        for part in [
            text(action.and_then(|a| a.get("action"))),
            text(r.get("target"))
                .or_else(|| text(plan.and_then(|p| p.get("target"))))
                .or_else(|| text(action.and_then(|a| a.get("target")))),
        ]
        .into_iter()
        .flatten()
        {
            out.push(' ');
            out.push_str(&part);
        }
        if let Some(x) = text(r.get("result").and_then(|o| o.get("reached")).or_else(|| r.get("reached"))) {
            out.push_str(": ");
            out.push_str(&x);
        }
        // A recording is a file from anywhere: nothing in it reaches the terminal raw.
        out.chars().filter(|c| !c.is_control()).take(200).collect()
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
