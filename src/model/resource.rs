//! The GPU resources a workload asks for and a node offers: whole cards of a model, MIG
//! instances of a profile, shares of a card.

use serde::Serialize;

use super::sharing::ShareUnit;

/// Something a pending workload waits for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Resource {
    /// A whole card; `model` is a catalog model name, or `None` for any model.
    WholeCard {
        model: Option<String>,
    },
    MigInstance {
        profile: String,
    },
    /// A share of one card (time-slicing or MPS): a replica, a Slurm shard, Slurm mps units.
    Shared {
        unit: ShareUnit,
        model: Option<String>,
    },
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::WholeCard { model: Some(m) } => write!(f, "whole {m}"),
            Self::WholeCard { model: None } => f.write_str("whole (any)"),
            Self::MigInstance { profile } => write!(f, "MIG {profile}"),
            Self::Shared { unit, model: Some(m) } => write!(f, "{} {m}", unit.as_str()),
            Self::Shared { unit, model: None } => write!(f, "{} (any)", unit.as_str()),
        }
    }
}
