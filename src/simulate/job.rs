//! One job of a what-if's demand: when it arrives, how long it runs, what it asks for and
//! whether it may be preempted. Every demand input (the demo, a recording, a trace, the CSV)
//! becomes a list of these.

use serde::Serialize;

/// What a job is, for waits by class and for preemption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Latency-sensitive (inference, an Alibaba `LS` pod): never preempted, served first.
    Inference,
    /// Preemptible (training, an Alibaba `BE` pod): only past the minimum runtime.
    Training,
    /// Neither: never preempted, no latency promise.
    Other,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::Inference, Class::Training, Class::Other];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inference => "inference",
            Self::Training => "training",
            Self::Other => "other",
        }
    }

    /// Read from the CSV's `class` column (also the scheduler words people write there).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "inference" | "ls" | "serving" | "latency" => Some(Self::Inference),
            "training" | "be" | "batch" | "train" => Some(Self::Training),
            "other" | "" => Some(Self::Other),
            _ => None,
        }
    }

    /// Order in the queue: inference first (the article: inference first, training after).
    pub fn rank(self) -> u8 {
        match self {
            Self::Inference => 0,
            Self::Other => 1,
            Self::Training => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The input's name for it (pod name, job id, workload id).
    pub name: Box<str>,
    /// Seconds from the start of the demand.
    pub submit: i64,
    /// Seconds of work once running, never below one.
    pub duration: i64,
    /// Cards it asks for; with `milli < 1000`, one card's share.
    pub gpus: u32,
    /// The share of each card it asks for, in thousandths (1000: whole cards). A MIG profile
    /// asks for its compute (`3g`: 3000/7) and memory, so it maps onto any model.
    pub milli: u32,
    /// GPU memory it needs per card, MiB (0: unknown, any card's memory does).
    pub mem_mib: u64,
    pub class: Class,
    /// The scheduler's priority (higher first within a class).
    pub priority: i32,
    /// Seconds between its checkpoints (training); `None`: it cannot resume, a preemption
    /// loses everything.
    pub checkpoint_s: Option<u32>,
    /// Host CPU (thousandths of a core) and memory (MiB) on its node; 0: none asked.
    pub cpu_milli: u32,
    pub host_mem_mib: u64,
    /// GPU models it may run on, as the fleet's model names; empty: any.
    pub models: Vec<Box<str>>,
    /// How much of what it holds it really uses, thousandths of its request (1000: all of it).
    pub use_milli: u32,
}

impl Job {
    /// A whole-card job of `gpus` cards: the shape tests and the demo start from.
    pub fn new(name: &str, submit: i64, duration: i64, gpus: u32) -> Self {
        Self {
            name: name.into(),
            submit,
            duration: duration.max(1),
            gpus: gpus.max(1),
            milli: 1000,
            mem_mib: 0,
            class: Class::Training,
            priority: 0,
            checkpoint_s: None,
            cpu_milli: 0,
            host_mem_mib: 0,
            models: Vec::new(),
            use_milli: 1000,
        }
    }

    /// Whether it may run on cards of model `name` (any, where it names none).
    pub fn may_run_on(&self, name: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|x| x.eq_ignore_ascii_case(name))
    }

    /// Asks for a share of one card rather than whole cards.
    pub fn fractional(&self) -> bool {
        self.milli < 1000
    }

    /// GPU-seconds of demand: cards times their share times the duration.
    pub fn gpu_seconds(&self) -> f64 {
        f64::from(self.gpus) * f64::from(self.milli) / 1000.0 * self.duration as f64
    }

    /// GPU-equivalents it asks for (cards times share).
    pub fn gpu_equivalents(&self) -> f64 {
        f64::from(self.gpus) * f64::from(self.milli) / 1000.0
    }
}

/// The share of a card a MIG profile's compute is (`compute_slices` of seven), rounded down
/// so that the slices needed come back exact (`1g`: 142, `3g`: 428, `7g`: 1000).
pub fn milli_of_slices(compute_slices: u8, of: u8) -> u32 {
    (u32::from(compute_slices) * 1000 / u32::from(of.max(1))).clamp(1, 1000)
}

/// Compute slices of `of` that `milli` thousandths of a card need.
pub fn slices_for(milli: u32, of: u8) -> u8 {
    (milli.min(1000) * u32::from(of)).div_ceil(1000).max(1) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_shares_come_back_to_their_slices() {
        for of in [4u8, 7] {
            for s in 1..=of {
                assert_eq!(slices_for(milli_of_slices(s, of), of), s, "{s} of {of}");
            }
        }
        assert_eq!(slices_for(460, 7), 4);
        assert_eq!(slices_for(1000, 7), 7);
    }
}
