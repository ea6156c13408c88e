//! How a card is shared: exclusive, MIG, time-sliced, MPS or a vendor's partition mode; the
//! replicas a scheduler hands out and how many are in use; the CUDA contexts on the card. NVML
//! and DCGM have no context-switch rate, so crowding is told by contexts and replicas, never by
//! an invented number.

use serde::{Deserialize, Serialize};

/// The ways a card is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharingMode {
    /// One holder at a time (the scheduler hands the card out whole).
    Exclusive,
    /// MIG instances: hardware isolation of memory and compute.
    Mig,
    /// Time-slicing: contexts take turns, no memory or fault isolation.
    TimeSliced,
    /// MPS: one server runs every client's kernels side by side; limits on memory and threads
    /// per client where set, but one client's fault takes down all of them.
    Mps,
    /// A vendor's partition mode (AMD's compute partitions SPX…CPX with memory partitions
    /// NPS1…NPS8): the physical GPU split into partitions, each a GPU of its own to the driver
    /// and the scheduler (SPX: one, the whole card). Not MIG.
    Partitioned,
    /// Dynamic Resource Allocation under DynamicMIG: the driver lays the card out per claim
    /// (a MIG instance made for each allocated claim, or the whole card), from a counter set.
    DraDynamic,
}

impl SharingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exclusive => "exclusive",
            Self::Mig => "mig",
            Self::TimeSliced => "time-sliced",
            Self::Mps => "mps",
            Self::Partitioned => "partitioned",
            Self::DraDynamic => "dra-dynamic",
        }
    }

    /// Several workloads share the card without isolation (interference and OOM risk).
    pub fn unisolated(self) -> bool {
        matches!(self, Self::TimeSliced | Self::Mps)
    }

    /// The filter word and config spelling: `excl`, `mig`, `ts`, `mps`.
    pub fn short(self) -> &'static str {
        match self {
            Self::Exclusive => "excl",
            Self::Mig => "mig",
            Self::TimeSliced => "ts",
            Self::Mps => "mps",
            Self::Partitioned => "part",
            Self::DraDynamic => "dra",
        }
    }
}

/// The unit a shared request counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareUnit {
    /// One replica of a card: a Kubernetes time-slicing or MPS replica, a Slurm `shard`.
    Replica,
    /// Slurm `mps` units: a share of one card's MPS count (100 per card by convention), which
    /// becomes the client's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`.
    Mps,
}

impl ShareUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Replica => "replica",
            Self::Mps => "mps share",
        }
    }

    /// The unit in the plural, for counts: `replicas`, `MPS units`.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Replica => "replicas",
            Self::Mps => "MPS units",
        }
    }
}

/// What a source says of a card's sharing. Every field is `None` where no source said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Sharing {
    /// The configured mode (a device-plugin label, a Slurm shard or mps GRES, a running MPS
    /// server). `None`: no source says; `Card::sharing_mode` then infers what it can.
    pub mode: Option<SharingMode>,
    /// Units per card a scheduler hands out: Kubernetes replicas, Slurm shards or mps units
    /// on this card.
    pub replicas: Option<u32>,
    /// The unit `replicas` counts in.
    pub unit: Option<ShareUnit>,
    /// Units in use on this card, where a source says which card (Slurm's device index, the
    /// simulator); Kubernetes counts replicas per node only.
    pub replicas_used: Option<u32>,
    /// CUDA contexts on the card: NVML's compute and MPS compute processes, the simulator.
    /// `None` where no source can list processes (schedulers, dcgm-exporter).
    pub contexts: Option<u32>,
    /// An MPS control daemon or server serves this card (NVML sees `nvidia-cuda-mps-server`).
    pub mps_server: Option<bool>,
    /// MPS per-client limits where known: pinned device memory and active thread percentage.
    pub mps_memory_limit_mib: Option<u64>,
    pub mps_thread_pct: Option<u32>,
    /// Where the mode was read ("label nvidia.com/gpu.sharing-strategy=time-slicing").
    pub origin: Option<String>,
    /// Under [`SharingMode::Partitioned`]: the compute partition mode (`SPX`, `DPX`, `QPX`,
    /// `CPX`) and the memory partition mode (`NPS1`, `NPS4`), as the source names them.
    pub compute_partition: Option<String>,
    pub memory_partition: Option<String>,
}
