//! Workloads: jobs and pods that hold cards or wait for them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::card_ref::CardRef;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Training,
    Inference,
    Other,
}

impl WorkloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Training => "training",
            Self::Inference => "inference",
            Self::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadState {
    Pending,
    Running,
    /// Asked to stop: checkpointing before a requeue or eviction.
    Checkpointing,
    Completing,
    Completed,
    Failed,
    Unknown,
}

impl WorkloadState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Checkpointing => "checkpointing",
            Self::Completing => "completing",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }

    /// Holds cards now.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Running | Self::Checkpointing | Self::Completing)
    }
}

/// What a workload asked for. Whole GPUs and a MIG profile are alternatives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Request {
    pub gpus: Option<u32>,
    pub mig_profile: Option<String>,
    /// GPU memory the workload holds: the total of its cards or MIG instances once it runs
    /// (the store fills it from what it holds where a source does not say).
    pub gpu_memory_mib: Option<u64>,
    /// Host memory it asked for (Slurm's memory per node), never compared with GPU memory.
    pub host_memory_mib: Option<u64>,
    /// The GPU model asked for, where the request names one (a Slurm gres type, a node selector).
    pub model: Option<String>,
    /// A share of a card instead of whole cards or an instance (Kubernetes
    /// `nvidia.com/gpu.shared`, Slurm `--gres=shard:N` or `--gres=mps:N`); `gpus` is then `None`.
    pub shares: Option<Shares>,
}

/// Units of a shared card a workload asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Shares {
    pub unit: super::sharing::ShareUnit,
    pub count: u32,
}

impl Request {
    /// What the request asks for and how many units, as the queue and the free-capacity
    /// counts match it: a share, a MIG profile, or whole cards (1 where no count is given).
    pub fn asks(&self) -> (super::resource::Resource, u64) {
        use super::resource::Resource;
        if let Some(s) = self.shares {
            let model = self.model.as_deref().map(super::mig::catalog::model_key);
            return (Resource::Shared { unit: s.unit, model }, u64::from(s.count.max(1)));
        }
        let n = u64::from(self.gpus.unwrap_or(1).max(1));
        match &self.mig_profile {
            Some(p) => (Resource::MigInstance { profile: p.clone() }, n),
            None => (Resource::WholeCard { model: self.model.as_deref().map(super::mig::catalog::model_key) }, n),
        }
    }

    /// Asks for GPUs at all (whole cards, an instance or a share).
    pub fn wants_gpu(&self) -> bool {
        self.gpus.is_some_and(|n| n > 0) || self.mig_profile.is_some() || self.shares.is_some_and(|s| s.count > 0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Workload {
    /// Backend-qualified id: `slurm:42`, `k8s:ns/pod`, `sim:17`.
    pub id: String,
    pub name: String,
    pub owner: Option<String>,
    pub kind: WorkloadKind,
    pub state: WorkloadState,
    /// Why it waits (pending) or why it ended.
    pub reason: Option<String>,
    pub priority: Option<i64>,
    pub request: Request,
    pub submitted_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub node: Option<String>,
    #[serde(serialize_with = "serialize_cards", deserialize_with = "deserialize_cards")]
    pub cards: Vec<CardRef>,
    /// Memory the workload actually uses, where a source can tell.
    pub memory_used_mib: Option<u64>,
    /// Whether the scheduler can put it back in the queue (Slurm's `requeue`), where known.
    pub requeueable: Option<bool>,
    /// Compute activity of what it holds, now and over a window (the store fills it).
    pub activity: Option<super::activity::Activity>,
}

fn serialize_cards<S: serde::Serializer>(cards: &[CardRef], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(cards.iter().map(ToString::to_string))
}

/// `"NODE/INDEX"` strings back to cards (node names hold no `/`).
fn deserialize_cards<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<CardRef>, D::Error> {
    use serde::Deserialize;
    let names = Vec::<String>::deserialize(d)?;
    names
        .iter()
        .map(|n| {
            let (node, index) =
                n.rsplit_once('/').ok_or_else(|| serde::de::Error::custom(format!("card {n:?}: not NODE/INDEX")))?;
            let index = index.parse().map_err(|_| serde::de::Error::custom(format!("card {n:?}: not NODE/INDEX")))?;
            Ok(CardRef::new(node, index))
        })
        .collect()
}

impl Workload {
    pub fn new(id: impl Into<String>, name: impl Into<String>, kind: WorkloadKind, state: WorkloadState) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            owner: None,
            kind,
            state,
            reason: None,
            priority: None,
            request: Request::default(),
            submitted_at: None,
            started_at: None,
            node: None,
            cards: Vec::new(),
            memory_used_mib: None,
            requeueable: None,
            activity: None,
        }
    }

    /// How long it has run, as of `now`.
    pub fn runtime(&self, now: DateTime<Utc>) -> Option<chrono::Duration> {
        self.started_at.filter(|_| self.state.is_active()).map(|s| now - s)
    }

    /// How long it has waited, as of `now`, while pending.
    pub fn wait(&self, now: DateTime<Utc>) -> Option<chrono::Duration> {
        self.submitted_at.filter(|_| self.state == WorkloadState::Pending).map(|s| now - s)
    }

    /// How long it waited before it ran: from submission to now while pending, to its start
    /// once started (`None` where a time is unknown).
    pub fn waited(&self, now: DateTime<Utc>) -> Option<chrono::Duration> {
        match (self.state, self.submitted_at, self.started_at) {
            (WorkloadState::Pending, Some(s), _) => Some(now - s),
            (_, Some(s), Some(t)) if t >= s => Some(t - s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A running workload waited from its submission to its start (the detail said "-").
    #[test]
    fn a_running_workload_waited_until_it_started() {
        let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap_or_default();
        let mut w = Workload::new("sim:1", "train", WorkloadKind::Training, WorkloadState::Pending);
        w.submitted_at = Some(t0);
        assert_eq!(w.waited(t0 + chrono::Duration::minutes(9)), Some(chrono::Duration::minutes(9)));
        w.state = WorkloadState::Running;
        w.started_at = Some(t0 + chrono::Duration::minutes(12));
        assert_eq!(w.waited(t0 + chrono::Duration::hours(5)), Some(chrono::Duration::minutes(12)));
        w.submitted_at = None;
        assert_eq!(w.waited(t0), None);
    }

    #[test]
    fn runtime_and_wait_depend_on_state() {
        let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap_or_default();
        let now = t0 + chrono::Duration::minutes(45);
        let mut w = Workload::new("sim:1", "train", WorkloadKind::Training, WorkloadState::Pending);
        w.submitted_at = Some(t0);
        assert_eq!(w.wait(now), Some(chrono::Duration::minutes(45)));
        assert_eq!(w.runtime(now), None);
        w.state = WorkloadState::Running;
        w.started_at = Some(t0 + chrono::Duration::minutes(5));
        assert_eq!(w.wait(now), None);
        assert_eq!(w.runtime(now), Some(chrono::Duration::minutes(40)));
    }
}
