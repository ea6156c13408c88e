//! The domain model: pure data about nodes, cards, MIG instances, workloads and the queue.
//!
//! Nothing here does IO or knows where data came from; sources build these values and the
//! store merges them. Unknown values are `None`, never 0.

pub mod activity;
pub mod capacity;
pub mod card_ref;
pub mod demand;
pub mod dra;
pub mod event;
pub mod fleet;
pub mod invariants;
pub mod kinds;
pub mod mig;
pub mod queue;
pub mod resource;
pub mod schedule;
pub mod sharing;
pub mod source;
pub mod totals;
pub mod workload;

pub use card_ref::CardRef;
pub use event::{Event, Severity};
pub use fleet::{
    Capacity, Card, CardHistory, ComputeInstance, ComputeMode, Fleet, Health, MigInstance, MigState, Node, Placements,
    Process, Vendor,
};
pub use kinds::KindRules;
pub use queue::{Demand, QueueKnown, QueueSummary};
pub use resource::Resource;
pub use sharing::{ShareUnit, Sharing, SharingMode};
pub use source::{SourceHealth, SourceKind, SourceStatus};
pub use totals::Totals;
pub use workload::{Request, Shares, Workload, WorkloadKind, WorkloadState};
