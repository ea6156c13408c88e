//! Per-source health: every source's state is always visible.

use chrono::{DateTime, Utc};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Simulated,
    Nvml,
    Prometheus,
    Scrape,
    Slurm,
    Kubernetes,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Simulated => "simulated",
            Self::Nvml => "nvml",
            Self::Prometheus => "prometheus",
            Self::Scrape => "scrape",
            Self::Slurm => "slurm",
            Self::Kubernetes => "kubernetes",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SourceHealth {
    Connecting,
    Live {
        at: DateTime<Utc>,
    },
    /// Last good data is kept but old: `since` is when it stopped being fresh.
    Stale {
        since: DateTime<Utc>,
        error: Option<String>,
    },
    Unavailable {
        reason: String,
    },
}

impl SourceHealth {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Live { .. } => "live",
            Self::Stale { .. } => "stale",
            Self::Unavailable { .. } => "unavailable",
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Stale { error, .. } => error.as_deref(),
            Self::Unavailable { reason } => Some(reason),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SourceStatus {
    pub name: String,
    pub kind: SourceKind,
    pub health: SourceHealth,
    /// How often the source reports; three missed intervals make it stale.
    #[serde(rename = "interval_ms", with = "millis")]
    pub interval: std::time::Duration,
    /// What the last good collection had to skip (bad lines, blank values), if anything.
    pub note: Option<String>,
    /// Wall-clock time of the last good collection.
    pub last_ok: Option<chrono::DateTime<chrono::Utc>>,
    /// What the last good collection reported.
    pub reported: Reported,
    /// The source reports the queue (a scheduler, the simulator, Prometheus with the queue).
    pub queue: bool,
}

impl SourceStatus {
    /// A source that answered at `at` (for tests and fixtures that build fleets by hand).
    pub fn live(name: &str, kind: SourceKind, at: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            name: name.to_string(),
            kind,
            health: SourceHealth::Live { at },
            interval: std::time::Duration::from_secs(1),
            note: None,
            last_ok: Some(at),
            reported: Reported::default(),
            queue: true,
        }
    }
}

/// How much one collection of a source reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Reported {
    pub nodes: usize,
    pub cards: usize,
    pub workloads: usize,
}

impl SourceStatus {
    /// One line for the header: "sim: live", "prometheus: stale 42s", "nvml: unavailable: no library".
    pub fn summary(&self, now: DateTime<Utc>) -> String {
        match &self.health {
            SourceHealth::Connecting => format!("{}: connecting", self.name),
            SourceHealth::Live { .. } => match &self.note {
                Some(n) => format!("{}: live ({n})", self.name),
                None => format!("{}: live", self.name),
            },
            SourceHealth::Stale { since, .. } => {
                format!("{}: stale {}s", self.name, (now - *since).num_seconds().max(0))
            }
            SourceHealth::Unavailable { reason } => format!("{}: unavailable: {reason}", self.name),
        }
    }
}

/// A duration as whole milliseconds (recordings keep each source's interval).
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<std::time::Duration, D::Error> {
        u64::deserialize(d).map(std::time::Duration::from_millis)
    }
}
